"""Dataset registry: lookup, data-directory resolution, listing, and the verified download."""
from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from hpctwin.datasets import registry
from hpctwin.datasets.registry import DatasetError
from hpctwin.twin.cli import main


def test_registry_matches_manifest_names():
    reg = registry.load_registry()
    assert {"CTC-SP2", "KTH-SP2", "SDSC-SP2", "HPC2N", "SDSC-BLUE"} <= set(reg)
    assert reg["CTC-SP2"].jobs == 77222
    assert reg["CTC-SP2"].sha256 == "9fa28ac16c4386fb81b72a91d8bd8888281df2948a9d912769d387c5ee285bb4"
    assert registry.lookup("ctc-sp2").name == "CTC-SP2"
    with pytest.raises(DatasetError, match="unknown dataset 'NOPE'; known: CTC-SP2"):
        registry.lookup("NOPE")


def test_data_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCTWIN_DATA", str(tmp_path))
    assert registry.default_data_dir() == tmp_path
    assert registry.default_data_dir("/x") == registry.Path("/x")
    with pytest.raises(DatasetError, match=r"KTH-SP2: .* not found; run `hpctwin datasets fetch KTH-SP2"):
        registry.resolve("KTH-SP2")


def _fake_entry(monkeypatch, tmp_path, payload: bytes, sha: str):
    src = tmp_path / "upstream.swf.gz"
    src.write_bytes(payload)
    entry = replace(registry.lookup("KTH-SP2"), url=src.as_uri(), sha256=sha, info="")  # no archive URL: offline
    monkeypatch.setattr(registry, "lookup", lambda name: entry)
    return entry


def test_fetch_verifies_checksum(tmp_path, monkeypatch):
    payload = b"; MaxProcs: 4\n1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n"
    data = tmp_path / "data"
    entry = _fake_entry(monkeypatch, tmp_path, payload, hashlib.sha256(payload).hexdigest())
    p = registry.fetch("KTH-SP2", data)
    assert p == data / entry.dir / entry.file and p.read_bytes() == payload
    # a second fetch of a good file downloads nothing and returns it
    assert registry.fetch("KTH-SP2", data) == p


def test_fetch_checksum_mismatch_leaves_nothing(tmp_path, monkeypatch):
    data = tmp_path / "data"
    _fake_entry(monkeypatch, tmp_path, b"tampered", "0" * 64)
    with pytest.raises(DatasetError, match="sha256 mismatch"):
        registry.fetch("KTH-SP2", data)
    assert not [p for p in data.rglob("*") if p.is_file()]


def test_fetch_unreachable_url(tmp_path, monkeypatch):
    entry = replace(registry.lookup("KTH-SP2"), url=(tmp_path / "missing.gz").as_uri(), info="")
    monkeypatch.setattr(registry, "lookup", lambda name: entry)
    with pytest.raises(DatasetError, match="download from .* failed"):
        registry.fetch("KTH-SP2", tmp_path / "data")
    assert not (tmp_path / "data").exists()      # a failed (offline) fetch leaves no empty cache folder


def test_datasets_list_and_systems_commands(capsys):
    assert main(["datasets", "list"]) == 0
    out = capsys.readouterr().out
    ddir = registry.default_data_dir()
    line = next(ln for ln in out.splitlines() if ln.startswith("CTC-SP2 "))
    assert "77222" in line
    if ddir is not None and (ddir / "CTC-SP2").exists():
        assert " yes " in line and " OK " in line
    assert main(["systems"]) == 0
    out = capsys.readouterr().out
    assert "frontier" in out and "9408" in out and "generic" in out
