"""Registry of known public workload logs: names, checksums, download and lookup.

The data directory is, in order: the ``data_dir`` argument (``--data-dir``), the ``HPCTWIN_DATA``
environment variable, ``../shared/datasets`` relative to the current directory or to the project
checkout when it exists, else the user cache folder (``platformdirs.user_cache_dir("hpctwin")``
+ ``/datasets``, e.g. ``~/.cache/hpctwin/datasets`` on Linux). A log named ``NAME`` lives at
``DATA/<dir>/<file>`` as listed in ``datasets/registry.toml`` (generated from the shared datasets'
MANIFEST), whose ``format`` names its reader (`datasets.loader.FORMATS`).

`fetch` downloads a log from the Parallel Workloads Archive's own URL
(``https://www.cs.huji.ac.il/labs/parallel/workload/l_<log>/<file>``, the folder of the entry's
``info`` page), then from the pinned mirror ``url`` when the archive is unreachable or its bytes
differ, and keeps the file only when its sha256 matches the registry's.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REGISTRY_FILE = Path(__file__).with_name("registry.toml")
PROJECT_ROOT = Path(__file__).resolve().parent.parent


#: the data-directory rule, stated once: every command's ``--data-dir`` help and the docs use it
DATA_DIR_HELP = ("data directory holding the logs, traces and serving profiles: --data-dir, else $HPCTWIN_DATA, "
                 "else ../shared/datasets beside the working directory or the hpctwin checkout, else the user "
                 "cache folder (~/.cache/hpctwin/datasets on Linux), where hpctwin datasets fetch NAME downloads")


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
    format: str = "swf"
    note: str = ""

    def path(self, data_dir: Path) -> Path:
        return data_dir / self.dir / self.file

    @property
    def archive_url(self) -> str | None:
        """The Parallel Workloads Archive's own URL of the file (None for other sources)."""
        pwa = "https://www.cs.huji.ac.il/labs/parallel/workload/"
        if not self.info.startswith(pwa) or self.gzip_by_us:
            return None
        return self.info.rsplit("/", 1)[0] + "/" + self.file

    def urls(self) -> list[str]:
        """Download sources in order: the archive's own URL, then the pinned mirror."""
        return [u for u in (self.archive_url, self.url) if u]


#: the last registry parsed: ((path, mtime in ns, size in bytes), entries by name)
_PARSED: tuple[tuple[str, int, int], dict[str, DatasetEntry]] | None = None


def load_registry() -> dict[str, DatasetEntry]:
    """All known logs, by name: a new dict each call (the caller may change it) of the immutable
    entries of ``registry.toml``, parsed once per process (again when the file's path, modification
    time or size changes)."""
    global _PARSED
    st = os.stat(REGISTRY_FILE)
    key = (str(REGISTRY_FILE), st.st_mtime_ns, st.st_size)
    if _PARSED is None or _PARSED[0] != key:
        raw = tomllib.loads(REGISTRY_FILE.read_text())
        _PARSED = key, {name: DatasetEntry(name=name, **fields) for name, fields in raw.items()}
    return dict(_PARSED[1])


def user_cache_dir() -> Path:
    """The per-user cache folder for downloaded logs (platformdirs' convention per OS)."""
    import platformdirs  # noqa: PLC0415
    return Path(platformdirs.user_cache_dir("hpctwin")) / "datasets"


def default_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The data directory in force (see module docstring); the user cache folder as a last resort."""
    if data_dir is not None and str(data_dir).strip() == "":
        raise DatasetError("--data-dir: empty path")
    if data_dir:
        p = Path(data_dir)
        if p.exists() and not p.is_dir():
            raise DatasetError(f"--data-dir {p}: not a directory")
        return p
    env = os.environ.get("HPCTWIN_DATA")
    if env:
        return Path(env)
    for base in (Path.cwd(), PROJECT_ROOT):
        cand = base.parent / "shared" / "datasets"
        if cand.is_dir():
            return cand
    return user_cache_dir()


def lookup(name: str) -> DatasetEntry:
    reg = load_registry()
    if name in reg:
        return reg[name]
    lower = {k.lower(): v for k, v in reg.items()}
    if name.lower() in lower:
        return lower[name.lower()]
    from hpctwin.twin.schema import did_you_mean  # noqa: PLC0415
    raise DatasetError(f"unknown dataset {name!r}{did_you_mean(name, reg)}; known: {', '.join(reg)} "
                       "(or give a path to a workload file, FORMAT:FILE, or synthetic)")


def resolve(name: str, data_dir: str | os.PathLike | None = None) -> Path:
    """Path of a registered log in the data directory; raises DatasetError if absent."""
    entry = lookup(name)
    ddir = default_data_dir(data_dir)
    p = entry.path(ddir)
    if not p.exists():
        raise DatasetError(f"dataset {entry.name}: {p} not found; run `hpctwin datasets fetch {entry.name} "
                           f"--data-dir {ddir}` to download it, or point --data-dir (or HPCTWIN_DATA) at the "
                           "folder that holds it")
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
        p = e.path(ddir)
        present = p.exists()
        rows.append({"name": e.name, "machine": e.machine, "jobs": e.jobs, "present": present,
                     "checksum_ok": (sha256_of(p) == e.sha256) if present and e.sha256 else None,
                     "path": str(p), "format": e.format})
    return rows


def _download(url: str, dest: Path, timeout: float) -> None:
    """Copy ``url`` (http(s) or file://) to ``dest``; OSError on failure."""
    import urllib.request  # noqa: PLC0415  (only when downloading: http.client costs ~25 ms at start-up)
    with urllib.request.urlopen(url, timeout=timeout) as resp, open(dest, "wb") as f:
        while chunk := resp.read(1 << 20):
            f.write(chunk)


def fetch(name: str, data_dir: str | os.PathLike | None = None, timeout: float = 60.0,
          urls: list[str] | None = None) -> Path:
    """Download a registered log into the data directory and verify its sha256.

    Sources are tried in order (``urls``, default `DatasetEntry.urls`: the Parallel Workloads
    Archive, then the pinned mirror); the first whose bytes match the registry's sha256 wins. The
    download goes to a temporary file renamed only after the check passes, so a failed or
    interrupted download never leaves a file that looks complete.
    """
    entry = lookup(name)
    sources = list(urls) if urls is not None else entry.urls()
    if not sources or not entry.sha256:
        raise DatasetError(f"dataset {entry.name}: no single download ({entry.note or 'see MANIFEST.md'})")
    ddir = default_data_dir(data_dir)
    dest = entry.path(ddir)
    if dest.exists() and sha256_of(dest) == entry.sha256:
        return dest
    created = [d for d in (dest.parent, *dest.parent.parents) if not d.exists()]   # removed again on failure
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DatasetError(f"dataset {entry.name}: cannot create {dest.parent}: {e.strerror or e} "
                           "(give a writable --data-dir)") from None
    tmp = dest.with_name(dest.name + ".part")
    failures = []
    try:
        for url in sources:
            try:
                _download(url, tmp, timeout)
            except (OSError, ValueError) as e:
                failures.append(f"download from {url} failed: {getattr(e, 'reason', None) or e}")
                continue
            if entry.gzip_by_us:
                data = tmp.read_bytes()
                if data[:2] != b"\x1f\x8b":
                    tmp.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
                if entry.format == "swf":
                    from .swf import read_swf  # noqa: PLC0415 - a re-compressed copy: check it parses
                    read_swf(tmp)
                break
            got = sha256_of(tmp)
            if got == entry.sha256:
                break
            failures.append(f"sha256 mismatch for {url}: got {got}, expected {entry.sha256}")
        else:
            raise DatasetError(f"dataset {entry.name}: no source gave the expected file: " + "; ".join(failures))
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
        if not dest.exists():              # a failed (e.g. offline) fetch leaves no empty folders behind
            for d in created:
                try:
                    d.rmdir()
                except OSError:
                    break
    return dest
