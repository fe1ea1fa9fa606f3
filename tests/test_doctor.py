"""``hpctwin doctor``: one line per fact, hints for what is missing, kernel builds on request."""
from __future__ import annotations

from hpctwin.twin import doctor


def test_report_names_versions_kernels_data_and_extras(monkeypatch, tmp_path):
    monkeypatch.setenv("HPCTWIN_DATA", str(tmp_path))
    monkeypatch.setenv("HPCTWIN_CACHE_DIR", str(tmp_path / "cache"))
    rows, ok = doctor.report()
    d = dict(rows)
    assert ok and d["numpy"] and d["numba"]
    assert d["data directory"].startswith(f"{tmp_path} (from HPCTWIN_DATA; 0 known logs present: hpctwin datasets fetch")
    assert "not built yet" in d["kernels hpctwin_fastpath"] and str(tmp_path / "cache") in d["kernels hpctwin_fastpath"]
    assert d["HPCTWIN_CACHE_DIR"] == str(tmp_path / "cache")
    assert all(k in d for k in ("mpi4py", "mpiexec", "optional gymnasium"))


def test_kernels_off_and_missing_package_are_reported(monkeypatch, capsys):
    monkeypatch.setenv("HPCTWIN_AOT", "0")
    monkeypatch.setattr(doctor, "REQUIRED", doctor.REQUIRED + ("no-such-dist-hpctwin",))
    assert doctor.main([]) == 1
    out = capsys.readouterr().out
    assert "off (HPCTWIN_AOT=0: numba's JIT)" in out
    assert "no-such-dist-hpctwin" in out and "MISSING: pip install -e . installs it" in out
    doctor.build_kernels()
    assert "not built (HPCTWIN_AOT=0); runs use numba's JIT kernels" in capsys.readouterr().err
