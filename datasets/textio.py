"""Reading a (possibly gzip-compressed) text file, with errors that name the file."""
from __future__ import annotations

import gzip
from pathlib import Path


def read_text(path: Path, error: type[Exception] = ValueError) -> str:
    """The file's text (gzip detected by its magic bytes; UTF-8, else Latin-1).

    Raises ``error`` naming the file when it is missing or its gzip data is corrupt.
    """
    path = Path(path)
    if not path.exists():
        raise error(f"{path}: file not found")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise error(f"{path}: corrupt gzip data: {e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")
