"""`twin.csvout` writes exactly the bytes of ``DataFrame.to_csv(index=False)``: on hand-made tables
with every cell kind (NaN, inf, -0.0, float32, bool, ints, strings needing quotes, None, mixed
objects) and on the jobs tables of real runs (plain, power, network, failures, GPU allocation)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hpctwin.twin.csvout import columns_csv_bytes, csv_bytes, write_csv
from hpctwin.twin.run import RunConfig, simulate


def same(df: pd.DataFrame) -> None:
    assert csv_bytes(df) == df.to_csv(index=False).encode("utf-8")


def test_every_cell_kind():
    df = pd.DataFrame({
        "float": [1.0, np.nan, 0.1, 1e20, -0.0, np.inf, -np.inf, 1e-7],
        "int": np.arange(8) - 3,
        "bool": [True, False] * 4,
        "text": ["x", "a,b", 'q"q', "", None, np.nan, "line\nbreak", "ü"],
        "f32": np.array([0.1, 1.5, np.nan, 3, 4, 5, 6, 7], dtype=np.float32),
        "mixed": [1, 2.5, "s", None, True, 3, 4, np.float64(0.3)],
        "a,b": np.zeros(8, dtype=np.int32),
        'say "hi"': np.arange(8, dtype=np.uint8),
    })
    same(df)
    assert csv_bytes(df).splitlines()[0] == b'float,int,bool,text,f32,mixed,"a,b","say ""hi"""'
    assert csv_bytes(df).splitlines()[2] == b',-2,False,"a,b",1.5,2.5,0,1'


def test_tables_longer_than_a_chunk(monkeypatch, tmp_path):
    import hpctwin.twin.csvout as co
    monkeypatch.setattr(co, "CHUNK_ROWS", 3)
    df = pd.DataFrame({"a": np.arange(10) * 0.5, "s": [f"x,{i}" for i in range(10)]})
    same(df)
    same(df[["a"]])
    write_csv(df, tmp_path / "c.csv")
    assert (tmp_path / "c.csv").read_bytes() == df.to_csv(index=False).encode()


def test_single_column_empty_and_no_rows():
    df = pd.DataFrame({"text": ["", "a", None]})
    same(df)
    same(df.iloc[:0])
    same(pd.DataFrame({"x": [1.5, np.nan]}))


def test_unknown_column_types_fall_back_to_pandas(tmp_path):
    df = pd.DataFrame({"cat": pd.Categorical(["a", "b"]), "t": pd.to_datetime(["2020-01-01", "2021-02-03"]),
                       "cr": ["a\rb", "c"]})
    same(df)
    write_csv(df, tmp_path / "x.csv")
    assert (tmp_path / "x.csv").read_bytes() == df.to_csv(index=False).encode()


def test_columns_without_pandas():
    cols = {"id": np.array([3, 1]), "t": np.array([0.5, np.nan]), "ok": np.array([True, False]),
            "nodes": ["0-3,8", ""]}
    assert columns_csv_bytes(cols) == pd.DataFrame(cols).to_csv(index=False).encode()
    assert columns_csv_bytes(cols) == b'id,t,ok,nodes\n3,0.5,True,"0-3,8"\n1,,False,\n'
    with pytest.raises(ValueError, match="different lengths"):
        columns_csv_bytes({"a": [1, 2], "b": [1]})
    with pytest.raises(ValueError, match="at least one column"):
        columns_csv_bytes({})


RUNS = {
    "easy": RunConfig(workload="synthetic:jobs=400,nodes=64,seed=2", scheduler="easy", nodes=64),
    "conservative-killed": RunConfig(workload="synthetic:jobs=400,nodes=64,seed=4,load=1.1",
                                     scheduler="conservative", nodes=64),
    "power": RunConfig(workload="synthetic:jobs=300,nodes=100,seed=1", system="frontier", nodes=100, power=True),
    "network": RunConfig(workload="synthetic:jobs=200,nodes=64,seed=1", system="adastra", network=True),
    "failures": RunConfig(workload="synthetic:jobs=300,nodes=64,seed=3", nodes=64,
                          options={"failures": {"enabled": True, "node_mtbf_days": 2.0}}),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_jobs_tables_of_runs(name):
    res = simulate(RUNS[name])
    same(res.jobs)
    assert len(res.jobs) > 0
