"""Bad [power]/[cooling] input and wet-bulb files get clear errors naming the file and key."""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.power.config import PowerConfigError, load_wet_bulb_csv, parse_cooling, parse_power
from hpctwin.power.cooling import wet_bulb_series
from hpctwin.twin.system import load_system

GOOD = dict(cpu_idle_w=90.0, cpu_max_w=280.0, gpu_idle_w=88.0, gpu_max_w=560.0, mem_w=74.26,
            dcdc_efficiency=0.98, rectifier_efficiency=0.96)


def parse(**kw):
    d = dict(GOOD)
    for k, v in kw.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    return parse_power(d, nodes=16, cpus_per_node=1, gpus_per_node=4, path="sys/x.toml")


def test_good_table_parses():
    cfg = parse()
    assert cfg.node_idle_w == pytest.approx(90 + 4 * 88 + 74.26)


@pytest.mark.parametrize("key", ["cpu_idle_w", "cpu_max_w", "gpu_idle_w", "gpu_max_w", "mem_w"])
def test_missing_constant(key):
    with pytest.raises(PowerConfigError, match=rf"sys/x.toml: \[power\] key '{key}' is missing"):
        parse(**{key: None})


def test_negative_constant():
    with pytest.raises(PowerConfigError, match=r"sys/x.toml: \[power\] key 'mem_w' must be >= 0, got -1"):
        parse(mem_w=-1.0)


def test_non_number():
    with pytest.raises(PowerConfigError, match=r"\[power\] key 'nvme_w' must be a finite number, got 'a lot'"):
        parse(nvme_w="a lot")


@pytest.mark.parametrize("value", [0.0, 1.2, -0.5])
def test_efficiency_outside_unit_interval(value):
    with pytest.raises(PowerConfigError, match=r"\[power\] key 'rectifier_efficiency' is an efficiency and must be in \(0, 1\]"):
        parse(rectifier_efficiency=value)


def test_max_below_idle():
    with pytest.raises(PowerConfigError, match=r"\[power\] key 'gpu_max_w' \(50\) is below gpu_idle_w \(88\)"):
        parse(gpu_max_w=50.0)


def test_job_cap_below_idle():
    with pytest.raises(PowerConfigError, match=r"sys/x.toml: \[power\] key 'job_gpu_cap_w' \(60 W\) is below the GPU idle power"):
        parse(job_gpu_cap_w=60.0)


def test_unknown_key():
    with pytest.raises(PowerConfigError, match=r"\[power\] unknown key\(s\) 'cpu_idel_w'"):
        parse(cpu_idel_w=1.0)


def test_bad_choice():
    with pytest.raises(PowerConfigError, match=r"\[power\] key 'rectifier_sharing' must be one of equal, staged"):
        parse(rectifier_sharing="smart")


def test_cooling_errors():
    with pytest.raises(PowerConfigError, match=r"sys/x.toml: \[cooling\] key 'liquid_fraction' is an efficiency"):
        parse_cooling({"liquid_fraction": 1.5}, path="sys/x.toml")
    with pytest.raises(PowerConfigError, match=r"\[cooling\] key 'fmu_path' is missing \(backend = \"fmu\"\)"):
        parse_cooling({"backend": "fmu"}, path="sys/x.toml")
    with pytest.raises(PowerConfigError, match=r"\[cooling\] key 'tower_fan_design_w' must be >= 0"):
        parse_cooling({"tower_fan_design_w": -3.0}, path="sys/x.toml")


# ------------------------------------------------------------------ wet-bulb CSV
def write(tmp_path, text, name="wb.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_wet_bulb_csv_ok(tmp_path):
    t, w = load_wet_bulb_csv(write(tmp_path, "time_s,wet_bulb_c\n0,10\n3600,12\n7200,14\n"))
    assert list(t) == [0, 3600, 7200] and list(w) == [10, 12, 14]


def test_wet_bulb_csv_missing_value(tmp_path):
    p = write(tmp_path, "time_s,wet_bulb_c\n0,10\n3600,\n7200,14\n")
    with pytest.raises(PowerConfigError, match=rf"wet-bulb file {p}, line 3, column 'wet_bulb_c': missing"):
        load_wet_bulb_csv(p)


def test_wet_bulb_csv_nan(tmp_path):
    p = write(tmp_path, "time_s,wet_bulb_c\n0,10\n3600,nan\n7200,14\n")
    with pytest.raises(PowerConfigError, match=r"line 3, column 'wet_bulb_c'"):
        load_wet_bulb_csv(p)


def test_wet_bulb_csv_time_gap(tmp_path):
    p = write(tmp_path, "time_s,wet_bulb_c\n0,10\n3600,11\n7200,12\n18000,14\n21600,15\n")
    with pytest.raises(PowerConfigError, match=r"lines 4-5: gap of 10800 s between time_s 7200 and 18000"):
        load_wet_bulb_csv(p)


def test_wet_bulb_csv_bad_header_and_missing_file(tmp_path):
    p = write(tmp_path, "t,wb\n0,10\n")
    with pytest.raises(PowerConfigError, match=r"line 1: header must be 'time_s,wet_bulb_c'"):
        load_wet_bulb_csv(p)
    with pytest.raises(PowerConfigError, match=r"nope.csv: not found \(key \[cooling\] wet_bulb_csv\)"):
        load_wet_bulb_csv(str(tmp_path / "nope.csv"))


def test_wet_bulb_series_interpolates_and_checks_range(tmp_path):
    write(tmp_path, "time_s,wet_bulb_c\n0,10\n100,20\n", name="w.csv")
    cfg = parse_cooling({"wet_bulb_csv": "w.csv"}, path=str(tmp_path / "sys.toml"))
    assert wet_bulb_series(cfg, np.array([0.0, 50.0, 100.0])) == pytest.approx([10, 15, 20])
    with pytest.raises(PowerConfigError, match=r"covers 0..100 s but the run needs 0..150 s"):
        wet_bulb_series(cfg, np.array([0.0, 150.0]))


def test_system_file_with_bad_power_table(tmp_path):
    """A whole system file: the error names the file and the key."""
    src = load_system("generic").path
    text = open(src).read().replace("mem_w = 74.26", "mem_w = -74.26")
    p = tmp_path / "bad.toml"
    p.write_text(text)
    spec = load_system(str(p))
    with pytest.raises(PowerConfigError, match=rf"{p}: \[power\] key 'mem_w' must be >= 0"):
        parse_power(spec.power, nodes=spec.nodes, cpus_per_node=spec.cpus_per_node,
                    gpus_per_node=spec.gpus_per_node, path=spec.path)
