"""Shared by the hostile test clients: record this process's pid (and its role) in a file, so that
tests/test_external_hostile.py can check that the twin ended every process of the client's group."""
import os


def record(path: str, role: str = "client") -> None:
    """Append ``role pid`` to ``path`` (one line, flushed at once)."""
    with open(path, "a") as f:
        f.write(f"{role} {os.getpid()}\n")
