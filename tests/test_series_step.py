"""The time-series step: a given ``sample_dt`` is kept; the default is 15 s, widened for a run without
physics models whose series would exceed `SERIES_MAX_SAMPLES` samples (issue 24 item 6)."""
from __future__ import annotations

import tomllib

import h5py
import numpy as np
import pytest

from hpctwin.twin.config import RunConfig
from hpctwin.twin.results import DEFAULT_SAMPLE_DT, SERIES_MAX_SAMPLES, series_step
from hpctwin.twin.run import run
from hpctwin.twin.workload import Workload

CAP = SERIES_MAX_SAMPLES


@pytest.mark.parametrize("span, models, want", [
    (0.0, False, 15.0),
    (15.0 * CAP, False, 15.0),                 # exactly the cap: 15 s
    (15.0 * CAP + 1, False, 30.0),
    (28_763_776.0, False, 300.0),              # KTH-SP2's 11 months: 5 min, 95,880 samples
    (60.0 * CAP + 1, False, 120.0),
    (43200.0 * CAP, False, 43200.0),
    (43200.0 * CAP + 1, False, 86400.0),       # beyond 12 h: whole days
    (86400.0 * CAP * 2.5, False, 3 * 86400.0),
    (28_763_776.0, True, 15.0),                # physics models: always 15 s
])
def test_default_step(span, models, want):
    assert series_step(None, 100.0, 100.0 + span, models) == want


@pytest.mark.parametrize("given", [0.5, 15.0, 7.0, 1e6])
def test_a_given_step_is_kept(given):
    assert series_step(given, 0.0, 1e12, False) == given
    assert series_step(given, 0.0, 1e12, True) == given


def _long_log(days: float) -> Workload:
    """Three jobs spread over ``days`` days (the series' span), on a 4-unit machine."""
    span = days * 86400.0
    return Workload.from_arrays("long", submit=[0.0, span / 2, span - 100.0], runtime=[50.0, 60.0, 100.0],
                                procs=[1, 2, 4], requested_time=[100.0, 100.0, 100.0])


def test_a_long_run_without_models_gets_a_wider_step_and_says_so(tmp_path):
    wl = _long_log(60)                          # 5,184,000 s: 345,600 samples at 15 s -> 60 s (86,400)
    res = run(RunConfig(workload="long", nodes=4, scheduler="fcfs", out=str(tmp_path / "r")), workload=wl)
    assert res.config.sample_dt == 60.0
    t, _ = res.timeseries["time"]
    assert len(t) == 86_400 and np.array_equal(np.diff(t[:3]), [60.0, 60.0])
    assert any("60 s step" in n and "--sample-dt 15" in n for n in res.summary["notes"])
    with h5py.File(tmp_path / "r" / "timeseries.h5") as f:
        assert f.attrs["sample_dt_s"] == 60.0 and f["utilisation"].shape == (86_400,)
    assert tomllib.loads((tmp_path / "r" / "config.toml").read_text())["run"]["sample_dt"] == 60.0
    # utilisation is still the exact interval average: 50 + 2*60 + 4*100 unit-s over 4 units
    u, _ = res.timeseries["utilisation"]
    assert float(np.sum(u.astype(np.float64)) * 60.0 * 4) == pytest.approx(570.0, rel=1e-6)


def test_an_explicit_15_s_step_is_kept_without_a_note():
    wl = _long_log(60)
    res = run(RunConfig(workload="long", nodes=4, scheduler="fcfs", sample_dt=15.0), workload=wl)
    assert res.config.sample_dt == 15.0 and len(res.timeseries["time"][0]) == 345_600
    assert not any("step" in n for n in res.summary.get("notes", []))


def test_a_short_run_keeps_the_default_step_and_its_config():
    wl = _long_log(1)
    cfg = RunConfig(workload="short", nodes=4, scheduler="fcfs")
    res = run(cfg, workload=wl)
    assert res.config.sample_dt == DEFAULT_SAMPLE_DT and cfg.sample_dt is None


def test_a_given_step_names_the_run_folder_the_default_does_not():
    from hpctwin.twin.cli import build_parser, default_run_name
    parse = build_parser().parse_args
    assert "dt" not in default_run_name(parse(["run", "-w", "KTH-SP2"]), {})
    assert "-dt15.0-" in default_run_name(parse(["run", "-w", "KTH-SP2", "--sample-dt", "15"]), {})
