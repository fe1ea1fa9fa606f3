"""Reading a (possibly gzip-compressed) text file, with errors that name the file.

Shared conventions of every text reader of this package: a UTF-8 byte-order mark is dropped,
``\\r\\n`` and lone ``\\r`` line ends become ``\\n`` (so line numbers match what an editor shows),
and a directory, an empty path or a missing file is an error naming the path.
"""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

_BOM = b"\xef\xbb\xbf"


def check_input_path(path, error: type[Exception] = ValueError) -> Path:
    """``path`` as a Path, after checking it names an existing regular file."""
    if path is None or str(path).strip() == "":
        raise error("workload path is empty")
    p = Path(path)
    if p.is_dir():
        raise error(f"{p}: is a directory, not a workload file")
    if not p.exists():
        raise error(f"{p}: file not found")
    if not p.is_file():                  # a FIFO or a device (/dev/zero) would be read forever
        raise error(f"{p}: not a regular file")
    return p


def read_text(path: Path, error: type[Exception] = ValueError) -> str:
    """The file's text (gzip detected by its magic bytes; UTF-8, else Latin-1), BOM dropped,
    line ends normalised to ``\\n``.

    Raises ``error`` naming the file when it is missing, a directory, unreadable or its gzip data
    is corrupt.
    """
    path = check_input_path(path, error)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror or e}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise error(f"{path}: corrupt gzip data: {e}") from None
    if raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text
