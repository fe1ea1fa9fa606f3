"""config.toml's writer (tomli-w behind `twin.tomlwrite.dumps`): what TOML cannot hold is converted, every
string round-trips through tomllib, and the same configuration gives the same bytes."""
from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np

from hpctwin.twin.tomlwrite import dumps


def test_the_run_table_is_written_as_before():
    text = dumps({"run": {"workload": "KTH-SP2", "seed": 0, "sample_dt": 300.0, "power": False, "out": None},
                  "inputs": {"workload": {"path": "/d/k.swf", "bytes": 411455}}})
    assert text == ('[run]\nworkload = "KTH-SP2"\nseed = 0\nsample_dt = 300.0\npower = false\n\n'
                    '[inputs.workload]\npath = "/d/k.swf"\nbytes = 411455\n')


def test_control_characters_quotes_and_odd_keys_round_trip():
    doc = {"run": {"workload": 'tab\there "q" back\\slash \x01 \x7f nl\n cr\r é',
                   "weird key.with dots": 1, "": "empty key"}}
    assert tomllib.loads(dumps(doc)) == doc


def test_conversions_none_tuples_numpy_paths_and_special_floats():
    doc = {"run": {"a": None, "t": (1, 2, None), "i": np.int64(7), "f": np.float64(0.5), "p": Path("/x/y"),
                   "b": np.bool_(True), "nan": float("nan"), "inf": -math.inf}}
    back = tomllib.loads(dumps(doc))["run"]
    assert "a" not in back and back["t"] == [1, 2] and back["i"] == 7 and type(back["i"]) is int
    assert back["f"] == 0.5 and back["p"] == "/x/y" and math.isnan(back["nan"]) and back["inf"] == -math.inf
    assert back["b"] is True


def test_same_config_same_bytes():
    doc = {"run": {"z": 1, "a": 2}, "options": {"power": {"k": [1.5, 2.5]}}}
    assert dumps(doc) == dumps(dict(doc))
    assert dumps(doc).index("z = 1") < dumps(doc).index("a = 2")      # insertion order kept
