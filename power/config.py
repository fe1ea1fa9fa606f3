"""Validation of the ``[power]`` and ``[cooling]`` tables of a system file.

Every machine constant lives in ``twin/systems/<name>.toml`` with its source in a comment; this
module turns the raw TOML dicts into typed, checked dataclasses. Bad input raises `PowerConfigError`
(a `ValueError`) naming the file, the table and the key.

Units: watts (W), degrees Celsius (C), kilograms per second (kg/s), joules per kelvin (J/K),
seconds (s). Efficiencies are fractions in (0, 1].
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


class PowerConfigError(ValueError):
    """A ``[power]``/``[cooling]`` table or an input file that cannot be used."""


def _where(path: str, table: str, key: str) -> str:
    return f"system file {path or '<memory>'}: [{table}] key {key!r}"


def _num(d: dict, key: str, path: str, table: str, *, default: float | None = None,
         minimum: float | None = 0.0, strict_min: bool = False, maximum: float | None = None,
         required: bool = False) -> float:
    """Read a number; missing -> default (or error when required / no default)."""
    if key not in d:
        if required or default is None:
            raise PowerConfigError(f"{_where(path, table, key)} is missing")
        return float(default)
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise PowerConfigError(f"{_where(path, table, key)} must be a finite number, got {v!r}")
    v = float(v)
    if minimum is not None and (v < minimum or (strict_min and v <= minimum)):
        op = ">" if strict_min else ">="
        raise PowerConfigError(f"{_where(path, table, key)} must be {op} {minimum:g}, got {v:g}")
    if maximum is not None and v > maximum:
        raise PowerConfigError(f"{_where(path, table, key)} must be <= {maximum:g}, got {v:g}")
    return v


def _int(d: dict, key: str, path: str, table: str, *, default: int | None = None, minimum: int = 0) -> int:
    if key not in d:
        if default is None:
            raise PowerConfigError(f"{_where(path, table, key)} is missing")
        return int(default)
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise PowerConfigError(f"{_where(path, table, key)} must be an integer >= {minimum}, got {v!r}")
    return int(v)


def _eff(d: dict, key: str, path: str, table: str, default: float | None = None) -> float:
    """An efficiency in (0, 1]."""
    if key not in d and default is not None:
        return float(default)
    v = _num(d, key, path, table, default=default, minimum=None)
    if not (0.0 < v <= 1.0):
        raise PowerConfigError(f"{_where(path, table, key)} is an efficiency and must be in (0, 1], got {v:g}")
    return v


def _choice(d: dict, key: str, path: str, table: str, choices: tuple[str, ...], default: str) -> str:
    v = d.get(key, default)
    if v not in choices:
        raise PowerConfigError(f"{_where(path, table, key)} must be one of {', '.join(choices)}, got {v!r}")
    return str(v)


#: ``[power]`` keys of node sleep states (W per node), read by the power-saving model (`power.suspend`):
#: a powered-down node, a booting node, a node shutting down
NODE_STATE_KEYS = ("node_off_w", "node_boot_w", "node_shutdown_w")


# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PowerConfig:
    """Node components, conversion chain and layout of one machine (all powers in W).

    Node component power (the DC-DC stage's output) at CPU utilisation ``uc`` and GPU utilisation
    ``ug`` in [0, 1]::

        P_node = cpus*(cpu_idle + uc*(cpu_max-cpu_idle)) + gpus*(gpu_idle + ug*(gpu_max-gpu_idle))
                 + mem + nics*nic + nvme + other

    Conversion chain (ORNL RAPS ``raps/power.py``): node DC-DC stage
    ``P_in = (P_node + dcdc_loss) / dcdc_efficiency``; per chassis, the sum of node inputs plus the
    switches is shared by the chassis rectifiers, each with ``P_in = (P_out + rect_loss) / rect_eff``;
    CDU pumps add a constant per CDU.
    """

    path: str
    nodes: int
    cpus_per_node: int
    gpus_per_node: int
    cpu_idle_w: float
    cpu_max_w: float
    gpu_idle_w: float
    gpu_max_w: float
    mem_w: float
    nic_w: float
    nics_per_node: int
    nvme_w: float
    other_w: float
    dcdc_loss_w: float
    dcdc_efficiency: float
    nodes_per_chassis: int
    chassis_per_rack: int
    racks_per_cdu: int
    cdus: int
    missing_rack_positions: tuple[int, ...]
    slots: int                      # node slots powered (>= nodes)
    empty_slots: str                # "idle": unschedulable slots draw idle power; "off": nothing
    rectifiers_per_chassis: int
    rectifier_loss_w: float
    rectifier_efficiency: float
    rectifier_sharing: str          # "equal" (RAPS default) or "staged" (RAPS smart load sharing)
    rectifier_peak_w: float
    switches_per_chassis: int
    switch_w: float
    cdu_pump_w: float
    price_per_kwh: float
    cap_power_exponent: float       # P_dyn ~ f^alpha under DVFS (caps)
    job_cpu_cap_w: float            # per-device caps applied to every job (inf = none)
    job_gpu_cap_w: float
    facility_cap_w: float           # facility-wide cap enforced by throttling (inf = none)

    # ----------------------------------------------------------------- derived figures
    @property
    def node_idle_w(self) -> float:
        """Component power of an idle node (W)."""
        return float(self.node_power_w(0.0, 0.0))

    @property
    def node_max_w(self) -> float:
        """Component power of a node at full CPU and GPU utilisation (W)."""
        return float(self.node_power_w(1.0, 1.0))

    @property
    def static_node_w(self) -> float:
        """Memory + NICs + NVMe + other (W): the part of node power that does not depend on load."""
        return self.mem_w + self.nics_per_node * self.nic_w + self.nvme_w + self.other_w

    def node_power_w(self, cpu_util, gpu_util, cpu_cap_w=math.inf, gpu_cap_w=math.inf):
        """Node component power (W) for utilisations in [0, 1], with optional per-device caps (W).

        A cap limits each device's draw to ``min(P(u), max(cap, idle))``. Vectorised over arrays.
        """
        uc = np.clip(cpu_util, 0.0, 1.0)
        ug = np.clip(gpu_util, 0.0, 1.0)
        pc = np.minimum(self.cpu_idle_w + uc * (self.cpu_max_w - self.cpu_idle_w),
                        np.maximum(cpu_cap_w, self.cpu_idle_w))
        pg = np.minimum(self.gpu_idle_w + ug * (self.gpu_max_w - self.gpu_idle_w),
                        np.maximum(gpu_cap_w, self.gpu_idle_w))
        return self.cpus_per_node * pc + self.gpus_per_node * pg + self.static_node_w


def parse_power(table: dict[str, Any], *, nodes: int, cpus_per_node: int, gpus_per_node: int,
                path: str = "") -> PowerConfig:
    """Validate a ``[power]`` table (see the built-in files for the keys and their sources)."""
    t, p = "power", path
    d = dict(table)
    known = {
        "cpu_idle_w", "cpu_max_w", "gpu_idle_w", "gpu_max_w", "mem_w", "nic_w", "nics_per_node",
        "nvme_w", "other_w", "dcdc_loss_w", "dcdc_efficiency", "nodes_per_chassis",
        "chassis_per_rack", "racks_per_cdu", "cdus", "missing_rack_positions", "slots",
        "empty_slots", "rectifiers_per_chassis", "rectifier_loss_w", "rectifier_efficiency",
        "rectifier_sharing", "rectifier_peak_w", "switches_per_chassis", "switch_w", "cdu_pump_w",
        "price_per_kwh", "cap_power_exponent", "job_cpu_cap_w", "job_gpu_cap_w", "facility_cap_w",
        *NODE_STATE_KEYS,
    }
    unknown = sorted(set(d) - known)
    if unknown:
        raise PowerConfigError(f"system file {path or '<memory>'}: [power] unknown key(s) "
                               f"{', '.join(map(repr, unknown))}; "
                               f"known keys: {', '.join(sorted(known))}")
    cpu_idle = _num(d, "cpu_idle_w", p, t, required=True)
    cpu_max = _num(d, "cpu_max_w", p, t, required=True)
    if cpu_max < cpu_idle:
        raise PowerConfigError(f"{_where(p, t, 'cpu_max_w')} ({cpu_max:g}) is below cpu_idle_w ({cpu_idle:g})")
    if gpus_per_node > 0:
        gpu_idle = _num(d, "gpu_idle_w", p, t, required=True)
        gpu_max = _num(d, "gpu_max_w", p, t, required=True)
    else:
        gpu_idle = _num(d, "gpu_idle_w", p, t, default=0.0)
        gpu_max = _num(d, "gpu_max_w", p, t, default=0.0)
    if gpu_max < gpu_idle:
        raise PowerConfigError(f"{_where(p, t, 'gpu_max_w')} ({gpu_max:g}) is below gpu_idle_w ({gpu_idle:g})")
    npc = _int(d, "nodes_per_chassis", p, t, default=1, minimum=1)
    cpr = _int(d, "chassis_per_rack", p, t, default=1, minimum=1)
    rpc = _int(d, "racks_per_cdu", p, t, default=1, minimum=1)
    slots = _int(d, "slots", p, t, default=nodes, minimum=1)
    if slots < nodes:
        raise PowerConfigError(f"{_where(p, t, 'slots')} ({slots}) is smaller than [system] nodes ({nodes})")
    missing = d.get("missing_rack_positions", [])
    if not isinstance(missing, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                for x in missing):
        raise PowerConfigError(f"{_where(p, t, 'missing_rack_positions')} must be a list of integers >= 0, "
                               f"got {missing!r}")
    chassis = -(-slots // npc)
    racks = -(-chassis // cpr)
    cdus_needed = -(-(racks + len(missing)) // rpc)
    cdus = _int(d, "cdus", p, t, default=cdus_needed, minimum=0)
    cap_gpu = _num(d, "job_gpu_cap_w", p, t, default=math.inf)
    cap_cpu = _num(d, "job_cpu_cap_w", p, t, default=math.inf)
    if math.isfinite(cap_gpu) and cap_gpu < gpu_idle:
        raise PowerConfigError(f"{_where(p, t, 'job_gpu_cap_w')} ({cap_gpu:g} W) is below the GPU idle power "
                               f"gpu_idle_w ({gpu_idle:g} W)")
    if math.isfinite(cap_cpu) and cap_cpu < cpu_idle:
        raise PowerConfigError(f"{_where(p, t, 'job_cpu_cap_w')} ({cap_cpu:g} W) is below the CPU idle power "
                               f"cpu_idle_w ({cpu_idle:g} W)")
    cfg = PowerConfig(
        path=path, nodes=nodes, cpus_per_node=cpus_per_node, gpus_per_node=gpus_per_node,
        cpu_idle_w=cpu_idle, cpu_max_w=cpu_max, gpu_idle_w=gpu_idle, gpu_max_w=gpu_max,
        mem_w=_num(d, "mem_w", p, t, required=True),
        nic_w=_num(d, "nic_w", p, t, default=0.0),
        nics_per_node=_int(d, "nics_per_node", p, t, default=1 if "nic_w" in d else 0),
        nvme_w=_num(d, "nvme_w", p, t, default=0.0),
        other_w=_num(d, "other_w", p, t, default=0.0),
        dcdc_loss_w=_num(d, "dcdc_loss_w", p, t, default=0.0),
        dcdc_efficiency=_eff(d, "dcdc_efficiency", p, t, default=1.0),
        nodes_per_chassis=npc, chassis_per_rack=cpr, racks_per_cdu=rpc, cdus=cdus,
        missing_rack_positions=tuple(int(x) for x in missing), slots=slots,
        empty_slots=_choice(d, "empty_slots", p, t, ("idle", "off"), "idle"),
        rectifiers_per_chassis=_int(d, "rectifiers_per_chassis", p, t, default=1, minimum=1),
        rectifier_loss_w=_num(d, "rectifier_loss_w", p, t, default=0.0),
        rectifier_efficiency=_eff(d, "rectifier_efficiency", p, t, default=1.0),
        rectifier_sharing=_choice(d, "rectifier_sharing", p, t, ("equal", "staged"), "equal"),
        rectifier_peak_w=_num(d, "rectifier_peak_w", p, t, default=math.inf, minimum=0.0, strict_min=True),
        switches_per_chassis=_int(d, "switches_per_chassis", p, t, default=0),
        switch_w=_num(d, "switch_w", p, t, default=0.0),
        cdu_pump_w=_num(d, "cdu_pump_w", p, t, default=0.0),
        price_per_kwh=_num(d, "price_per_kwh", p, t, default=0.0),
        cap_power_exponent=_num(d, "cap_power_exponent", p, t, default=2.0, minimum=0.0, strict_min=True),
        job_cpu_cap_w=cap_cpu, job_gpu_cap_w=cap_gpu,
        facility_cap_w=_num(d, "facility_cap_w", p, t, default=math.inf, minimum=0.0, strict_min=True),
    )
    for key in NODE_STATE_KEYS:               # read by power.suspend; checked here with the table
        if key in d:
            _num(d, key, p, t)
    if cdus < cdus_needed and cfg.cdu_pump_w > 0:
        raise PowerConfigError(f"{_where(p, t, 'cdus')} ({cdus}) is too small for {racks} racks at "
                               f"{rpc} racks per CDU (need {cdus_needed})")
    return cfg


# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CoolingConfig:
    """Parameters of the built-in warm-water cooling model (`power.cooling`), or of an FMU.

    See `power.cooling` for the equations. Temperatures in C, heat in W, flows in kg/s, capacities
    in J/K. ``wet_bulb_c`` is a constant; ``wet_bulb_csv`` (if set) a CSV time series instead.
    """

    path: str
    backend: str = "builtin"                 # "builtin" | "fmu"
    supply_setpoint_c: float = 32.0
    secondary_delta_t_design_c: float = 10.0
    secondary_heat_capacity_j_per_k: float = 5.0e7
    liquid_fraction: float = 1.0
    design_heat_w: float = 1.0e6
    facility_delta_t_design_c: float = 8.0
    facility_heat_capacity_j_per_k: float = 2.0e8
    hx_approach_c: float = 1.5
    tower_approach_design_c: float = 4.0
    wet_bulb_design_c: float = 24.0
    tower_fan_design_w: float = 0.0
    tower_fan_min_speed: float = 0.2
    tower_ua_exponent: float = 0.8
    primary_pump_design_w: float = 0.0
    tower_pump_design_w: float = 0.0
    pump_min_flow: float = 0.3
    chiller_cop: float = 6.0
    wet_bulb_c: float = 15.0
    wet_bulb_csv: str = ""
    fmu_path: str = ""
    fmu_inputs: dict = field(default_factory=dict)
    fmu_outputs: dict = field(default_factory=dict)
    fmu_step_s: float = 0.0


def parse_cooling(table: dict[str, Any], *, path: str = "", default_design_heat_w: float = 1.0e6) -> CoolingConfig:
    """Validate a ``[cooling]`` table; relative CSV/FMU paths are resolved against the system file."""
    t, p = "cooling", path
    d = dict(table)
    known = set(CoolingConfig.__dataclass_fields__) - {"path"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise PowerConfigError(f"system file {path or '<memory>'}: [cooling] unknown key(s) "
                               f"{', '.join(map(repr, unknown))}; "
                               f"known keys: {', '.join(sorted(known))}")
    base = Path(path).parent if path else Path(".")

    def resolve(key: str) -> str:
        v = d.get(key, "")
        if not isinstance(v, str):
            raise PowerConfigError(f"{_where(p, t, key)} must be a path string, got {v!r}")
        if not v:
            return ""
        q = Path(v)
        return str(q if q.is_absolute() else (base / q))

    for key in ("fmu_inputs", "fmu_outputs"):
        m = d.get(key, {})
        if not isinstance(m, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in m.items()):
            raise PowerConfigError(f"{_where(p, t, key)} must be a table of name = \"FMU variable\" strings")
    cfg = CoolingConfig(
        path=path,
        backend=_choice(d, "backend", p, t, ("builtin", "fmu"), "builtin"),
        supply_setpoint_c=_num(d, "supply_setpoint_c", p, t, default=32.0, minimum=0.0, maximum=80.0),
        secondary_delta_t_design_c=_num(d, "secondary_delta_t_design_c", p, t, default=10.0, minimum=0.0,
                                        strict_min=True),
        secondary_heat_capacity_j_per_k=_num(d, "secondary_heat_capacity_j_per_k", p, t, default=5.0e7, minimum=0.0,
                                             strict_min=True),
        liquid_fraction=_eff(d, "liquid_fraction", p, t, default=1.0),
        design_heat_w=_num(d, "design_heat_w", p, t, default=default_design_heat_w, minimum=0.0, strict_min=True),
        facility_delta_t_design_c=_num(d, "facility_delta_t_design_c", p, t, default=8.0, minimum=0.0, strict_min=True),
        facility_heat_capacity_j_per_k=_num(d, "facility_heat_capacity_j_per_k", p, t, default=2.0e8, minimum=0.0,
                                            strict_min=True),
        hx_approach_c=_num(d, "hx_approach_c", p, t, default=1.5),
        tower_approach_design_c=_num(d, "tower_approach_design_c", p, t, default=4.0, minimum=0.0, strict_min=True),
        wet_bulb_design_c=_num(d, "wet_bulb_design_c", p, t, default=24.0, minimum=-40.0),
        tower_fan_design_w=_num(d, "tower_fan_design_w", p, t, default=0.0),
        tower_fan_min_speed=_num(d, "tower_fan_min_speed", p, t, default=0.2, maximum=1.0),
        tower_ua_exponent=_num(d, "tower_ua_exponent", p, t, default=0.8, minimum=0.0, strict_min=True),
        primary_pump_design_w=_num(d, "primary_pump_design_w", p, t, default=0.0),
        tower_pump_design_w=_num(d, "tower_pump_design_w", p, t, default=0.0),
        pump_min_flow=_num(d, "pump_min_flow", p, t, default=0.3, maximum=1.0),
        chiller_cop=_num(d, "chiller_cop", p, t, default=6.0, minimum=0.0, strict_min=True),
        wet_bulb_c=_num(d, "wet_bulb_c", p, t, default=15.0, minimum=-40.0, maximum=40.0),
        wet_bulb_csv=resolve("wet_bulb_csv"),
        fmu_path=resolve("fmu_path"),
        fmu_inputs=dict(d.get("fmu_inputs", {})),
        fmu_outputs=dict(d.get("fmu_outputs", {})),
        fmu_step_s=_num(d, "fmu_step_s", p, t, default=0.0),
    )
    if cfg.backend == "fmu" and not cfg.fmu_path:
        raise PowerConfigError(f"{_where(p, t, 'fmu_path')} is missing (backend = \"fmu\")")
    return cfg


# ---------------------------------------------------------------------------------------------
def load_wet_bulb_csv(path: str, *, max_gap_factor: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Read a wet-bulb series: CSV with a header and columns ``time_s,wet_bulb_c``.

    Times are seconds on the run's clock, strictly increasing. Raises `PowerConfigError` naming the
    file and line for a missing file, a bad header, an empty or non-numeric cell, a non-increasing
    time, or a gap (a step longer than ``max_gap_factor`` times the median step).
    """
    f = Path(path)
    if not f.exists():
        raise PowerConfigError(f"wet-bulb file {path}: not found (key [cooling] wet_bulb_csv)")
    times: list[float] = []
    temps: list[float] = []
    with f.open(newline="") as fh:
        rows = csv.reader(fh)
        header = next(rows, None)
        if header is None or [h.strip() for h in header[:2]] != ["time_s", "wet_bulb_c"]:
            raise PowerConfigError(f"wet-bulb file {path}, line 1: header must be 'time_s,wet_bulb_c', got {header!r}")
        for lineno, row in enumerate(rows, start=2):
            if not row or all(not c.strip() for c in row):
                raise PowerConfigError(f"wet-bulb file {path}, line {lineno}: empty line (gap in the series)")
            if len(row) < 2:
                raise PowerConfigError(f"wet-bulb file {path}, line {lineno}: expected 2 columns, got {len(row)}")
            for name, cell in zip(("time_s", "wet_bulb_c"), row[:2]):
                c = cell.strip()
                try:
                    v = float(c)
                except ValueError:
                    v = math.nan
                if not c or not math.isfinite(v):
                    raise PowerConfigError(f"wet-bulb file {path}, line {lineno}, column {name!r}: missing or "
                                           f"non-numeric value {cell!r} (gap in the series)")
            times.append(float(row[0]))
            temps.append(float(row[1]))
    if len(times) < 2:
        raise PowerConfigError(f"wet-bulb file {path}: need at least 2 samples, got {len(times)}")
    t = np.asarray(times)
    w = np.asarray(temps)
    dt = np.diff(t)
    bad = np.flatnonzero(dt <= 0)
    if bad.size:
        i = int(bad[0])
        raise PowerConfigError(f"wet-bulb file {path}, line {i + 3}: time_s {t[i + 1]:g} is not after {t[i]:g}")
    med = float(np.median(dt))
    gap = np.flatnonzero(dt > max_gap_factor * med)
    if gap.size:
        i = int(gap[0])
        raise PowerConfigError(f"wet-bulb file {path}, lines {i + 2}-{i + 3}: gap of {dt[i]:g} s between "
                               f"time_s {t[i]:g} and {t[i + 1]:g} (median step {med:g} s)")
    return t, w
