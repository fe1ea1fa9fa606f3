"""Registry of known public workload logs: names, checksums, download and lookup.

The data directory is, in order: the ``data_dir`` argument (``--data-dir``), the ``HPCTWIN_DATA``
environment variable, else ``../shared/datasets`` relative to the current directory or to the
project checkout when it exists. A log named ``NAME`` lives at ``DATA/<dir>/<file>`` as listed in
``datasets/registry.toml`` (generated from the shared datasets' MANIFEST).
"""
from __future__ import annotations

import gzip
import hashlib
import os
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REGISTRY_FILE = Path(__file__).with_name("registry.toml")
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class DatasetError(ValueError):
    """Unknown dataset name, missing data directory or file, failed checksum or download."""


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    file: str
    dir: str
    sha256: str
    jobs: int
    machine: str
    url: str
    size: int | None = None
    gzip_by_us: bool = False
    info: str = ""

    def path(self, data_dir: Path) -> Path:
        return data_dir / self.dir / self.file


def load_registry() -> dict[str, DatasetEntry]:
    """All known logs, by name."""
    raw = tomllib.loads(REGISTRY_FILE.read_text())
    return {name: DatasetEntry(name=name, **fields) for name, fields in raw.items()}


def default_data_dir(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The data directory in force (see module docstring), or None if none exists."""
    if data_dir:
        return Path(data_dir)
    env = os.environ.get("HPCTWIN_DATA")
    if env:
        return Path(env)
    for base in (Path.cwd(), PROJECT_ROOT):
        cand = base.parent / "shared" / "datasets"
        if cand.is_dir():
            return cand
    return None


def lookup(name: str) -> DatasetEntry:
    reg = load_registry()
    if name in reg:
        return reg[name]
    lower = {k.lower(): v for k, v in reg.items()}
    if name.lower() in lower:
        return lower[name.lower()]
    raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(reg)} "
                       "(or give a path to an .swf/.swf.gz file)")


def resolve(name: str, data_dir: str | os.PathLike | None = None) -> Path:
    """Path of a registered log in the data directory; raises DatasetError if absent."""
    entry = lookup(name)
    ddir = default_data_dir(data_dir)
    if ddir is None:
        raise DatasetError(f"dataset {entry.name}: no data directory (give --data-dir, set HPCTWIN_DATA, "
                           f"or run `hpctwin datasets fetch {entry.name}`)")
    p = entry.path(ddir)
    if not p.exists():
        raise DatasetError(f"dataset {entry.name}: {p} not found; run `hpctwin datasets fetch {entry.name} "
                           f"--data-dir {ddir}` to download it")
    return p


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def status(data_dir: str | os.PathLike | None = None) -> list[dict]:
    """One row per known log: name, machine, jobs, present locally, checksum OK (None if absent)."""
    ddir = default_data_dir(data_dir)
    rows = []
    for e in load_registry().values():
        p = e.path(ddir) if ddir else None
        present = bool(p and p.exists())
        rows.append({"name": e.name, "machine": e.machine, "jobs": e.jobs, "present": present,
                     "checksum_ok": (sha256_of(p) == e.sha256) if present else None,
                     "path": str(p) if p else ""})
    return rows


def fetch(name: str, data_dir: str | os.PathLike | None = None, timeout: float = 60.0) -> Path:
    """Download a registered log into the data directory and verify its sha256.

    The download goes to a temporary file that is renamed only after the check passes, so a failed or
    interrupted download never leaves a file that looks complete.
    """
    entry = lookup(name)
    ddir = default_data_dir(data_dir)
    if ddir is None:
        raise DatasetError("no data directory: give --data-dir or set HPCTWIN_DATA")
    dest = entry.path(ddir)
    if dest.exists() and sha256_of(dest) == entry.sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    try:
        with urllib.request.urlopen(entry.url, timeout=timeout) as resp, open(tmp, "wb") as f:
            while chunk := resp.read(1 << 20):
                f.write(chunk)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise DatasetError(f"dataset {entry.name}: download from {entry.url} failed: {e}") from None
    if entry.gzip_by_us:
        data = tmp.read_bytes()
        if data[:2] != b"\x1f\x8b":
            tmp.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
        from .swf import read_swf  # the checksum is of a re-compressed copy: check it parses
        read_swf(tmp)
    else:
        got = sha256_of(tmp)
        if got != entry.sha256:
            tmp.unlink(missing_ok=True)
            raise DatasetError(f"dataset {entry.name}: sha256 mismatch for {entry.url}: got {got}, "
                               f"expected {entry.sha256}")
    os.replace(tmp, dest)
    return dest
