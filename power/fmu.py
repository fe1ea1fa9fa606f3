"""Optional cooling back-end: an external FMU (Modelica co-simulation) run through ``fmpy``.

Select it in the system file::

    [cooling]
    backend = "fmu"
    fmu_path = "models/frontier_cooling.fmu"       # relative to the system file
    fmu_step_s = 15.0                               # communication step (default: sample_dt)
    [cooling.fmu_inputs]                            # our input -> FMU input variable
    heat_w = "simulator.datacenter.Q_flow_total"
    wet_bulb_c = "simulator.centralEnergyPlant.Twb"
    [cooling.fmu_outputs]                           # our output -> FMU output variable
    plant_w = "simulator.summary.W_flow_total"
    secondary_supply_c = "simulator.summary.T_sec_s_C"

Inputs we can feed: ``heat_w`` (rack heat, W) and ``wet_bulb_c`` (C). ``plant_w`` (cooling plant
power, W) is the one output the power model needs; any other mapped output is passed through to the
time series. The variable names are checked against the FMU's ``modelDescription.xml`` (read with
the standard library, so the check works without fmpy); simulating needs ``fmpy``
(``pip install hpctwin[fmu]``), imported lazily.
"""
from __future__ import annotations

import zipfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from hpctwin.power.config import CoolingConfig, PowerConfigError

FMU_INPUTS = ("heat_w", "wet_bulb_c")
REQUIRED_OUTPUTS = ("plant_w",)


def fmu_variables(path: str) -> dict[str, str]:
    """Scalar variables of an FMU: name -> causality (``input``, ``output``, ``parameter``...)."""
    p = Path(path)
    if not p.exists():
        raise PowerConfigError(f"FMU file {path} (key [cooling] fmu_path): not found")
    try:
        with zipfile.ZipFile(p) as z:
            xml = z.read("modelDescription.xml")
    except (zipfile.BadZipFile, KeyError) as e:
        raise PowerConfigError(f"FMU file {path} (key [cooling] fmu_path): not a valid FMU ({e})") from None
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as e:
        raise PowerConfigError(f"FMU file {path}: modelDescription.xml does not parse ({e})") from None
    out = {}
    for sv in root.iter("ScalarVariable"):
        out[sv.get("name", "")] = sv.get("causality", "local")
    for tag in ("Float64", "Float32", "Real"):               # FMI 3 variables
        for v in root.iter(tag):
            if v.get("name") and v.get("name") not in out:
                out[v.get("name")] = v.get("causality", "local")
    return out


def check_fmu(cfg: CoolingConfig) -> dict[str, str]:
    """Check the FMU file and the variable mapping; return the FMU's variables."""
    variables = fmu_variables(cfg.fmu_path)
    for ours in cfg.fmu_inputs:
        if ours not in FMU_INPUTS:
            raise PowerConfigError(f"system file {cfg.path}: [cooling.fmu_inputs] key {ours!r} is not an input "
                                   f"hpctwin provides (known: {', '.join(FMU_INPUTS)})")
    for ours in REQUIRED_OUTPUTS:
        if ours not in cfg.fmu_outputs:
            raise PowerConfigError(f"system file {cfg.path}: [cooling.fmu_outputs] key {ours!r} is missing")
    for table, mapping in (("fmu_inputs", cfg.fmu_inputs), ("fmu_outputs", cfg.fmu_outputs)):
        for ours, theirs in mapping.items():
            if theirs not in variables:
                raise PowerConfigError(f"system file {cfg.path}: [cooling.{table}] key {ours!r} names FMU variable "
                                       f"{theirs!r}, which {cfg.fmu_path} does not have")
    return variables


def _import_fmpy():
    try:
        import fmpy  # noqa: F401, PLC0415 - optional extra [fmu]
        return fmpy
    except ImportError:
        raise ImportError("the FMU cooling back-end needs fmpy: pip install 'hpctwin[fmu]' "
                          "(or set [cooling] backend = \"builtin\")") from None


def run_fmu(cfg: CoolingConfig, heat_w: np.ndarray, grid: np.ndarray, dt: float,
            wet_bulb_c: np.ndarray) -> dict[str, np.ndarray]:
    """Co-simulate the FMU over the grid; returns our outputs on the grid (one value per interval)."""
    check_fmu(cfg)
    fmpy = _import_fmpy()
    grid = np.asarray(grid, dtype=float)
    series = {"heat_w": np.asarray(heat_w, dtype=float), "wet_bulb_c": np.asarray(wet_bulb_c, dtype=float)}
    t_rel = grid - grid[0]
    dtype = [("time", np.float64)] + [(theirs, np.float64) for theirs in cfg.fmu_inputs.values()]
    signal = np.zeros(len(grid), dtype=dtype)
    signal["time"] = t_rel
    for ours, theirs in cfg.fmu_inputs.items():
        signal[theirs] = series[ours]
    step = cfg.fmu_step_s or dt
    res = fmpy.simulate_fmu(cfg.fmu_path, start_time=0.0, stop_time=float(t_rel[-1] + dt), step_size=step,
                            output_interval=dt, input=signal, output=list(cfg.fmu_outputs.values()))
    out = {}
    for ours, theirs in cfg.fmu_outputs.items():
        out[ours] = np.interp(t_rel, res["time"], res[theirs])
    return out
