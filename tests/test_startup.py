"""Start-up and output path of a run (issue 17 item 4): what a plain run imports, the jobs table
written from columns without pandas, the integral-float CSV text, the series averages, the Lublin
daily-weight table."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from hpctwin.twin import csvout, metrics

HEAVY = ("pandas", "scipy", "networkx", "numba", "matplotlib", "pyarrow")


def test_plain_run_imports_no_heavy_package(tmp_path):
    code = ("import sys\nfrom hpctwin.twin.cli import main\n"
            f"rc = main(['run', '-w', 'synthetic:jobs=300', '-q', '--out', {str(tmp_path / 'r')!r}])\n"
            f"print(rc, sorted(m for m in {HEAVY!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert out.stdout.split("\n")[0] == "0 []"
    assert (tmp_path / "r" / "jobs.csv").is_file() and (tmp_path / "r" / "timeseries.h5").is_file()


def test_run_result_jobs_frame_built_lazily_with_the_csv_bytes(tmp_path):
    from hpctwin.twin.run import RunConfig, run
    res = run(RunConfig(workload="synthetic:jobs=400", out=str(tmp_path / "r")))
    assert isinstance(res.job_columns, dict)               # columns until asked for the DataFrame
    df = res.jobs
    assert isinstance(df, pd.DataFrame) and res.job_columns is None and res.jobs is df
    assert list(df.columns[:4]) == ["job_id", "submit", "start", "end"] and len(df) == 400
    assert (tmp_path / "r" / "jobs.csv").read_bytes() == df.to_csv(index=False).encode()


@pytest.mark.parametrize("cols,plain", [
    ({"a": np.array([1.0, np.nan]), "b": np.array(["x", "y,z"]), "c": np.array([True, False])}, True),
    ({"a": [1, 2, 3]}, True),                               # pandas: int64
    ({"a": ["x", "y"]}, True),
    ({"a": [1, None]}, False),                              # pandas infers float64: "1.0"
    ({"a": [1.5, 2]}, False),
    ({"a": np.array([1, None], dtype=object)}, False),
    ({"a": np.zeros((2, 2))}, False),
])
def test_plain_columns_and_their_bytes(tmp_path, cols, plain):
    assert csvout.plain_columns(cols) is plain
    if plain:
        csvout.write_columns_csv(cols, tmp_path / "t.csv")
        assert (tmp_path / "t.csv").read_bytes() == pd.DataFrame(cols).to_csv(index=False).encode()


def test_integral_float_texts():
    a = np.array([12.0, np.nan, -3.0, 0.0, 9999999999999998.0])
    assert csvout._integral_texts(a) == ["12.0", "", "-3.0", "0.0", "9999999999999998.0"]
    assert csvout._column_texts(a) == ["12.0", "", "-3.0", "0.0", "9999999999999998.0"]
    for bad in ([-0.0, 1.0], [1e16], [np.inf], [0.5]):
        assert csvout._integral_texts(np.array(bad)) is None
    assert csvout._column_texts(np.array([-0.0, 1e16, 0.5])) == ["-0.0", "1e+16", "0.5"]


def test_interval_average_hand_values_and_uneven_ends():
    # 2 units busy on [0, 10), 4 from 10 on: averages over [0,5), [5,10), [10,15), [15,20)
    got = metrics.interval_average(np.array([0.0, 10.0]), np.array([2, 4]), np.array([0.0, 5, 10, 15]), 5.0)
    assert got.tolist() == [2.0, 2.0, 4.0, 4.0]
    # half an interval before the first change counts 0: [-2.5, 2.5) -> 2 x 2.5 / 5
    assert metrics.interval_average(np.array([0.0]), np.array([2]), np.array([-2.5]), 5.0).tolist() == [1.0]
    rng = np.random.default_rng(3)
    ct = np.sort(rng.uniform(0, 300, 200))
    v = rng.integers(0, 50, 200).astype(float)
    cum = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(ct))))

    def integral(t):                         # the signal's integral from -inf to t, point by point
        i = np.searchsorted(ct, t, side="right") - 1
        r = cum[np.maximum(i, 0)] + v[np.maximum(i, 0)] * (t - ct[np.maximum(i, 0)])
        return np.where(i < 0, 0.0, r)
    dt = 0.1                                 # grid + dt is often not the next grid point in floats
    grid = 3.3 + dt * np.arange(3000)
    want = (integral(grid + dt) - integral(grid)) / dt
    assert np.array_equal(metrics.interval_average(ct, v, grid, dt), want)
    assert np.array_equal(metrics.interval_average(ct, v, grid, dt, block=77), want)


def test_lublin_daily_weight_table_is_scipys_result():
    from scipy.special import gammainc

    from hpctwin.datasets import synthetic as syn
    from hpctwin.datasets.lublin_tables import DAILY_WEIGHTS
    assert len(DAILY_WEIGHTS) == 3
    for cls in (syn.BATCH, syn.INTERACTIVE, syn.TYPELESS):
        i = np.arange(syn.CYCLIC_DAY_START, syn.CYCLIC_DAY_START + syn.BUCKETS, dtype=np.float64)
        w = np.empty(syn.BUCKETS)
        idx = (np.arange(syn.CYCLIC_DAY_START, syn.CYCLIC_DAY_START + syn.BUCKETS) - 1) % syn.BUCKETS
        w[idx] = gammainc(cls.anum, (i + 0.5) / cls.bnum) - gammainc(cls.anum, (i - 0.5) / cls.bnum)
        assert syn.daily_weights(cls).tobytes() == (w / w.mean()).tobytes()


def test_topology_error_is_one_class():
    from hpctwin.topology import dragonfly, errors, presets
    assert dragonfly.TopologyError is errors.TopologyError is presets.TopologyError
    with pytest.raises(errors.TopologyError, match="unknown preset"):
        presets.network_params({"preset": "nope"})


def test_swf_fast_parser_one_line_and_fallback(tmp_path):
    from hpctwin.datasets.swf import SWFError, read_swf
    f = tmp_path / "one.swf"
    f.write_text("; MaxProcs: 8\n1 0 5 100 4 -1 -1 4 200 -1 1 3 2 -1 1 -1 -1 -1\n")
    wl = read_swf(f)
    assert wl.runtime.tolist() == [100.0] and wl.procs.tolist() == [4] and wl.requested_time.tolist() == [200.0]
    f.write_text("; MaxProcs: 8\n1 0 5 100 4 -1 -1 4 200 -1 1 3 2 -1 1 -1 -1 -1\n2 0 5 100 4 -1 -1 4 200\n")
    with pytest.raises(SWFError, match=r"one.swf:3: expected 18 fields, found 9"):
        read_swf(f)


def test_row_format_fields_match_pandas(tmp_path):
    cols = {"i": np.array([-(2 ** 62), 0, 7]), "u": np.array([2 ** 63 + 5, 1, 2], dtype=np.uint64),
            "whole": np.array([1.0, -2.0, 3e15]), "frac": np.array([0.1, -2.5, 1e-300]),
            "big": np.array([1e16, 2.0, 3.0]), "negzero": np.array([-0.0, 1.0, 2.0]),
            "nan": np.array([np.nan, 1.0, np.inf]), "f32": np.array([0.1, 2, 3], dtype=np.float32),
            "b": np.array([True, False, True]), "s": ["100%", 'say "hi"', "a,b"], "n": [1, 2, 3]}
    csvout.write_columns_csv(cols, tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_bytes() == pd.DataFrame(cols).to_csv(index=False).encode()
    assert csvout._column_field(cols["whole"]) == ("%d.0", [1, -2, 3000000000000000])
    assert csvout._column_field(cols["negzero"])[0] == "%r" and csvout._column_field(cols["nan"])[0] == "%s"
