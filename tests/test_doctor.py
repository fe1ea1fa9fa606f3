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


def test_top_level_help_lists_every_command_and_the_data_dir_rule(capsys):
    import pytest

    from hpctwin.twin.cli import main
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for cmd in ("run", "serve", "llm", "doctor", "sweep", "export", "report"):
        assert f"    {cmd} " in out
    assert "HPCTWIN_DATA" in out and "hpctwin doctor" in out


def test_misspelt_option_gets_a_suggestion(capsys):
    import pytest

    from hpctwin.twin.cli import main
    with pytest.raises(SystemExit):
        main(["run", "--sytem", "frontier"])
    assert "unrecognized arguments: --sytem frontier (did you mean: --sytem -> --system?)" in capsys.readouterr().err
