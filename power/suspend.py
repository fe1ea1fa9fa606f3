"""Slurm power saving: idle nodes power down, jobs allocated powered-down nodes wait for them to boot.

The ``power_saving`` model (`PowerSavingModel`; ``--set power_saving.enabled=true``) follows Slurm
22.05's ``src/slurmctld/power_save.c`` (``_do_power_work``) with any scheduler:

* **Suspend.** A node idle since ``last_busy`` (the end of its last job, or the run's first
  submission) whose SuspendTime is not off starts powering down at ``last_busy + SuspendTime + 1``
  s: Slurm tests ``last_busy < now - suspend_time`` on whole seconds, in a thread that scans each
  second a node changed. Nodes of ``SuspendExcNodes`` / ``SuspendExcParts`` never power down.
  At most ``SuspendRate`` nodes start powering down in any 60 s (0: no limit; Slurm's counter
  decays by ``(60 - dt) / 60`` between scans, the twin counts a sliding 60 s window), lowest node
  first; the others wait for the window.
* **Powering down.** Slurm takes the node out of ``avail_node_bitmap`` ("Don't allocate until
  after SuspendTimeout") and marks it POWERED_DOWN, allocatable again, when
  ``power_save_req_time + suspend_timeout < now``: the twin takes it out of service for
  ``SuspendTimeout + 1`` s (`twin.control.EngineControl.take_down`: schedulers see it held until
  then). It draws ``shutdown_w`` for ``shutdown_s`` (the real shutdown, default SuspendTimeout),
  then ``off_w``.
* **Resume.** A job allocated powered-down nodes holds them at once (``select_nodes`` ->
  ``JOB_POWER_UP_NODE`` | ``JOB_CONFIGURING``, node_scheduler.c); each such node is resumed at the
  allocation, or later when ``ResumeRate`` nodes were resumed in the last 60 s, and is up
  ``boot_s`` later (the real boot, default ResumeTimeout; it must not exceed ResumeTimeout, past
  which Slurm marks the node DOWN). The job's run begins when its last node is up: Slurm's
  ``job_config_fini`` (job_mgr.c) resets ``start_time`` (sacct's Start) and ``end_time = start +
  time limit`` then. The twin delays the run through `twin.contract.RunModel.start_delay`; the
  delay is the job column ``boot_delay_s`` and is part of ``wait``.
* **Power.** With ``--power on`` node power states feed `power.model.PowerModel` (its node-state
  interface): an idle node draws its idle power, a powering-down node ``shutdown_w``, a
  powered-down node ``off_w``, a booting node ``boot_w`` (W per node, from the options, else the
  system file's ``[power]`` ``node_off_w``/``node_boot_w``/``node_shutdown_w``, else for boot and
  shutdown the node's idle power; ``off_w`` has no default). A job's power is drawn from the
  start of its run. The summary's ``power_saving`` table gives the energy saved against the same
  nodes idling (node components; rack input through the conversion chain).

Which nodes a job gets is the policy's choice. Slurm 22.05 avoids powered-down nodes where it can
(``_build_node_list``, node_scheduler.c: a node set of powered-down nodes gets weight
``INFINITE - 1``, so powered-up nodes are tried first); the twin's policies choose units as they
always do (first-fit takes the lowest free units, which are the busiest and so the least likely to
be asleep); a policy may read the model's view (``powered_down()``) to prefer awake nodes.

Parameters come from the options (``--set power_saving.KEY=VALUE``, TOML ``[options.power_saving]``),
else from the run's slurm.conf (``options.scheduler.slurm_conf``), else Slurm 22.05's defaults
(``src/common/read_config.h``): SuspendTime off (NONE), SuspendTimeout 30 s, ResumeTimeout 60 s,
SuspendRate 60, ResumeRate 300 nodes/min. PartitionName ``SuspendTime``, ``SuspendTimeout``,
``ResumeTimeout`` apply to the partition's nodes, the largest over a node's partitions
(``_set_partition_options``), else the global value.

Not modelled: failures (the combination is refused: a node failing while it boots is requeue
logic of its own), ``--allocation gpu`` (nodes shared by several jobs), a facility power cap,
``SuspendExcNodes`` with a count (``n[1-8]:2``), ``ResumeFailProgram``, ``idle_on_node_suspend``.
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpctwin.power.suspend_conf import (SuspendConf, SuspendConfError, parse_suspend_time, parse_uint16,
                                        read_suspend_conf)
import hpctwin.power.stepseries as ss
from hpctwin.twin.model_api import ModelContext, RunModel
from hpctwin.twin.plugins import option

# Slurm 22.05 compiled-in defaults (src/common/read_config.h)
DEFAULT_SUSPEND_TIMEOUT = 30      # DEFAULT_SUSPEND_TIMEOUT (s)
DEFAULT_RESUME_TIMEOUT = 60       # DEFAULT_RESUME_TIMEOUT (s)
DEFAULT_SUSPEND_RATE = 60         # DEFAULT_SUSPEND_RATE (nodes per minute)
DEFAULT_RESUME_RATE = 300         # DEFAULT_RESUME_RATE (nodes per minute)
RATE_WINDOW_S = 60.0              # rates are per minute

# node states
ON, DOWNING, OFF, BOOTING = 0, 1, 2, 3
# event kinds (those needing the engine's control: SUSPEND, DOWNED)
SUSPEND, DOWNED, SHUTDOWN_DONE, BOOT, READY, BEGIN = range(6)
_NEEDS_CONTROL = (SUSPEND, DOWNED)


@dataclass(frozen=True)
class PowerSavingOptions:
    """``--set power_saving.KEY``: Slurm power saving (`power.suspend`). Unset keys come from the run's
    slurm.conf, else from Slurm 22.05's defaults."""

    enabled: bool = option(False, help="turn power saving on")
    suspend_time: float | None = option(None, unit="s", minimum=-1.0,
                                        help="SuspendTime: idle seconds before a node powers down; -1 = off (NONE)")
    suspend_timeout: float | None = option(None, unit="s", minimum=0.0, maximum=65535.0,
                                           help="SuspendTimeout: a powering-down node is unavailable this long "
                                                "(+1 s); default 30")
    resume_timeout: float | None = option(None, unit="s", minimum=0.0, maximum=65535.0,
                                          help="ResumeTimeout: the longest a node may take to boot; default 60")
    suspend_rate: int | None = option(None, unit="nodes/min", minimum=0, maximum=65535,
                                      help="SuspendRate: nodes that may start powering down per minute; 0 = no "
                                           "limit; default 60")
    resume_rate: int | None = option(None, unit="nodes/min", minimum=0, maximum=65535,
                                     help="ResumeRate: nodes that may be resumed per minute; 0 = no limit; default 300")
    suspend_exc_nodes: str | None = option(None, help="SuspendExcNodes: nodes that never power down (a hostlist of "
                                                      "slurm.conf names, or node indices '0-3,8' without names)")
    suspend_exc_parts: str | None = option(None, help="SuspendExcParts: partitions whose nodes never power down "
                                                      "(names of the slurm.conf)")
    boot_s: float | None = option(None, unit="s", minimum=0.0,
                                  help="the node's real boot time (default: its ResumeTimeout)")
    shutdown_s: float | None = option(None, unit="s", minimum=0.0,
                                      help="the node's real shutdown time (default: its SuspendTimeout)")
    off_w: float | None = option(None, unit="W", minimum=0.0,
                                 help="power of a powered-down node (default: [power] node_off_w of the system file)")
    boot_w: float | None = option(None, unit="W", minimum=0.0,
                                  help="power of a booting node (default: [power] node_boot_w, else its idle power)")
    shutdown_w: float | None = option(None, unit="W", minimum=0.0,
                                      help="power of a node shutting down (default: [power] node_shutdown_w, else "
                                           "its idle power)")


@dataclass
class Setting:
    """One resolved parameter: its value per node and where it came from."""

    value: np.ndarray
    source: str


class PowerSavingModel(RunModel):
    """Slurm power saving of a run (see the module docstring).

    ``options``: the `PowerSavingOptions`; ``slurm_conf``: the run's slurm.conf path (or None);
    ``system``: the `twin.system.SystemSpec` (or None) whose ``[power]`` table may give the state watts.
    """

    name = "power_saving"
    events_follow_jobs = True

    def __init__(self, options: PowerSavingOptions, slurm_conf: str | None = None, system: Any = None):
        self.opts = options
        self.conf_path = slurm_conf
        self.system = system
        self.power = None

    def use_models(self, models: dict) -> None:
        """The run's power model (when on) draws the node power states."""
        pm = models.get("power")
        if pm is not None:
            self.power = pm
            pm.when_bound(lambda m: m.enable_node_states())

    # ================================================================== binding
    def bind(self, ctx: ModelContext) -> None:
        self.ctx = ctx
        upn = int(getattr(ctx, "units_per_node", None) or 1)
        self.upn = upn
        n = self.n = int(ctx.n_nodes) // upn
        conf = read_suspend_conf(self.conf_path) if self.conf_path else None
        self.conf = conf
        self.names = self._node_names(conf, n)
        self.suspend_time = self._per_node("suspend_time", "SuspendTime", conf, math.inf,
                                           "Slurm 22.05 default NONE (read_config.c: SuspendTime unset = INFINITE)")
        self.suspend_timeout = self._per_node("suspend_timeout", "SuspendTimeout", conf, DEFAULT_SUSPEND_TIMEOUT,
                                              "Slurm 22.05 default (read_config.h DEFAULT_SUSPEND_TIMEOUT)")
        self.resume_timeout = self._per_node("resume_timeout", "ResumeTimeout", conf, DEFAULT_RESUME_TIMEOUT,
                                             "Slurm 22.05 default (read_config.h DEFAULT_RESUME_TIMEOUT)")
        self.suspend_rate = self._rate("suspend_rate", "SuspendRate", conf, DEFAULT_SUSPEND_RATE)
        self.resume_rate = self._rate("resume_rate", "ResumeRate", conf, DEFAULT_RESUME_RATE)
        self.excluded = self._exclusions(conf, n)
        self._check_programs(conf)
        st = self.suspend_time.value
        if not np.isfinite(st[~self.excluded]).any():
            raise SuspendConfError("power_saving is on but no node can power down: SuspendTime is off (NONE) "
                                   f"({self.suspend_time.source}) or every node is excluded; set "
                                   "--set power_saving.suspend_time=SECONDS (or SuspendTime in the slurm.conf)")
        self.boot_s = self._duration("boot_s", self.resume_timeout, "ResumeTimeout")
        self.shutdown_s = self._duration("shutdown_s", self.suspend_timeout, "SuspendTimeout")
        bad = np.flatnonzero(self.boot_s.value > self.resume_timeout.value)
        if bad.size:
            i = int(bad[0])
            raise SuspendConfError(f"power_saving.boot_s ({self.boot_s.value[i]:g} s) is longer than the ResumeTimeout "
                                   f"of node {self.names[i]} ({self.resume_timeout.value[i]:g} s, "
                                   f"{self.resume_timeout.source}): Slurm marks such a node DOWN ('not resumed by "
                                   "ResumeTimeout', power_save.c); raise ResumeTimeout or shorten boot_s")
        bad = np.flatnonzero(self.shutdown_s.value > self.suspend_timeout.value)
        if bad.size:
            i = int(bad[0])
            raise SuspendConfError(f"power_saving.shutdown_s ({self.shutdown_s.value[i]:g} s) is longer than the "
                                   f"SuspendTimeout of node {self.names[i]} ({self.suspend_timeout.value[i]:g} s): "
                                   "Slurm would hand out a node still shutting down; shorten shutdown_s or raise "
                                   "SuspendTimeout")
        self._watts()
        # ---- state
        nj = len(ctx.jobs)
        self.t0 = float(np.min(ctx.jobs.submit)) if nj else 0.0
        self.state = np.zeros(n, dtype=np.int8)
        self.held = np.zeros(n, dtype=np.int64)         # units of the node held by jobs
        self.ver = np.zeros(n, dtype=np.int64)          # bumped when the node gets busy (stale suspend events)
        self.ready_at = np.zeros(n)                     # boot end of a booting node (s)
        self.boot_delay = np.full(nj, np.nan)
        self._nodes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._heap: list = []
        self._seq = 0
        self._susp_window: deque = deque()
        self._resume_window: deque = deque()
        self.counts = {"suspends": 0, "resumes": 0, "jobs_delayed": 0, "suspends_deferred_by_rate": 0,
                       "resumes_deferred_by_rate": 0}
        # change logs (t, d) of the state counts and of the power saved (W, node components)
        self._log_t: list[float] = []
        self._log_down: list[float] = []
        self._log_off: list[float] = []
        self._log_up: list[float] = []
        self._log_saved: list[float] = []
        self._cur_w = self.idle_w.copy()                # W each node draws while it runs no job
        for i in np.flatnonzero(np.isfinite(st) & ~self.excluded):
            self._push(self.t0 + st[i] + 1.0, SUSPEND, (int(i), 0))

    def _node_names(self, conf: SuspendConf | None, n: int) -> list[str]:
        """Node names (slurm.conf NodeName order) when the conf names exactly the run's nodes, else indices."""
        if conf is not None and conf.node_names and len(conf.node_names) == n:
            return list(conf.node_names)
        return [str(i) for i in range(n)]

    def _conf_mismatch(self, conf: SuspendConf, what: str) -> SuspendConfError:
        return SuspendConfError(f"{conf.path}: {what} names slurm.conf nodes, but the NodeName lines define "
                                f"{len(conf.node_names)} nodes and the run has {self.n}; run with --nodes "
                                f"{len(conf.node_names)} (one unit a node) to map them")

    def _per_node(self, opt: str, key: str, conf: SuspendConf | None, default: float, why: str) -> Setting:
        """A time parameter per node: the option, else slurm.conf's global key, else ``default``; then
        PartitionName values on their nodes (the largest over a node's partitions), as
        ``power_save_set_timeouts`` does."""
        v = getattr(self.opts, opt)
        if v is not None:
            if opt == "suspend_time" and -1 < v < 0:
                raise SuspendConfError(f"power_saving.suspend_time: -1 (off) or seconds >= 0, got {v:g}")
            val = math.inf if (opt == "suspend_time" and v < 0) else float(v)
            src = f"option power_saving.{opt}"
        elif conf is not None and key in conf.values:
            text, ln = conf.values[key]
            where = conf.where(ln, key)
            val = (parse_suspend_time(text, where) if key == "SuspendTime"
                   else float(parse_uint16(text, where, "seconds")))
            src = f"{conf.path}:{ln} {key}"
        else:
            val, src = float(default), why
        out = np.full(self.n, val)
        if conf is not None and conf.partitions:
            part_val = np.full(self.n, np.nan)
            for name, attrs in conf.partitions.items():
                if key not in attrs:
                    continue
                text, ln = attrs[key]
                where = conf.where(ln, f"PartitionName={name} {key}")
                pv = (parse_suspend_time(text, where) if key == "SuspendTime"
                      else float(parse_uint16(text, where, "seconds")))
                idx = self._part_nodes(conf, name)
                part_val[idx] = np.fmax(part_val[idx], pv)
                src += f"; PartitionName={name} {key} ({conf.path}:{ln})"
            out = np.where(np.isnan(part_val), out, part_val)
        return Setting(out, src)

    def _part_nodes(self, conf: SuspendConf, name: str) -> np.ndarray:
        nodes = conf.part_nodes.get(name)
        if nodes is None:
            return np.arange(self.n)
        if len(conf.node_names) != self.n:
            raise self._conf_mismatch(conf, f"PartitionName={name}")
        pos = {nm: i for i, nm in enumerate(conf.node_names)}
        return np.array([pos[x] for x in nodes], dtype=np.int64)

    def _rate(self, opt: str, key: str, conf: SuspendConf | None, default: int) -> Setting:
        v = getattr(self.opts, opt)
        if v is not None:
            return Setting(np.array(int(v)), f"option power_saving.{opt}")
        if conf is not None and key in conf.values:
            text, ln = conf.values[key]
            return Setting(np.array(parse_uint16(text, conf.where(ln, key), "nodes per minute")),
                           f"{conf.path}:{ln} {key}")
        return Setting(np.array(default), f"Slurm 22.05 default (read_config.h DEFAULT_{key.upper()[:-4]}_RATE)")

    def _exclusions(self, conf: SuspendConf | None, n: int) -> np.ndarray:
        """Nodes that never power down: SuspendExcNodes and the nodes of SuspendExcParts."""
        exc = np.zeros(n, dtype=bool)
        self.exc_sources: list[str] = []
        nodes_text, where = self.opts.suspend_exc_nodes, "option power_saving.suspend_exc_nodes"
        if nodes_text is None and conf is not None and "SuspendExcNodes" in conf.values:
            nodes_text, ln = conf.values["SuspendExcNodes"]
            where = conf.where(ln, "SuspendExcNodes")
        if nodes_text is not None and str(nodes_text).strip():
            exc[self._named_nodes(str(nodes_text), where, conf)] = True
            self.exc_sources.append(where)
        parts_text, where = self.opts.suspend_exc_parts, "option power_saving.suspend_exc_parts"
        if parts_text is None and conf is not None and "SuspendExcParts" in conf.values:
            parts_text, ln = conf.values["SuspendExcParts"]
            where = conf.where(ln, "SuspendExcParts")
        if parts_text is not None and str(parts_text).strip():
            if conf is None or not conf.part_nodes:
                raise SuspendConfError(f"{where}: SuspendExcParts names partitions, but the run has no slurm.conf "
                                       "with PartitionName lines (options.scheduler.slurm_conf)")
            for name in (x.strip() for x in str(parts_text).split(",")):
                if name not in conf.part_nodes:
                    from hpctwin.twin.schema import did_you_mean  # noqa: PLC0415
                    hint = did_you_mean(name, list(conf.part_nodes))
                    raise SuspendConfError(f"{where}: unknown partition {name!r}{hint}; partitions: "
                                           f"{', '.join(conf.part_nodes)}")
                exc[self._part_nodes(conf, name)] = True
            self.exc_sources.append(where)
        return exc

    def _named_nodes(self, text: str, where: str, conf: SuspendConf | None) -> np.ndarray:
        """Node indices of a SuspendExcNodes value: a hostlist of slurm.conf names, or index ranges."""
        if ":" in text:
            raise SuspendConfError(f"{where}: SuspendExcNodes with a node count ({text!r}) is not modelled; list the "
                                   "nodes that never power down")
        if conf is not None and conf.node_names:
            from hpctwin.schedulers.slurm_conf import expand_hostlist  # noqa: PLC0415
            try:
                names = expand_hostlist(text)
            except ValueError as e:
                raise SuspendConfError(f"{where}: {e}") from None
            if len(conf.node_names) != self.n:
                raise self._conf_mismatch(conf, "SuspendExcNodes")
            pos = {nm: i for i, nm in enumerate(conf.node_names)}
            bad = [x for x in names if x not in pos]
            if bad:
                raise SuspendConfError(f"{where}: node {bad[0]!r} is not defined by a NodeName line")
            return np.array([pos[x] for x in names], dtype=np.int64)
        from hpctwin.twin.ranges import parse_ranges  # noqa: PLC0415
        try:
            idx = np.asarray(parse_ranges(text), dtype=np.int64)
        except ValueError:
            raise SuspendConfError(f"{where}: expected node indices such as '0-3,8' (the run has no slurm.conf node "
                                   f"names), got {text!r}") from None
        if idx.size and (idx.min() < 0 or idx.max() >= self.n):
            raise SuspendConfError(f"{where}: node index {int(idx.max())} is outside the machine's nodes "
                                   f"0-{self.n - 1}")
        return idx

    def _check_programs(self, conf: SuspendConf | None) -> None:
        """Slurm 22.05 turns power saving off without SuspendProgram and ResumeProgram (``_init_power_config``)."""
        if conf is None or self.opts.suspend_time is not None:
            return
        if not self.suspend_time.source.startswith(conf.path) and "PartitionName" not in self.suspend_time.source:
            return
        if not np.isfinite(self.suspend_time.value).any():
            return
        missing = [k for k in ("SuspendProgram", "ResumeProgram") if not conf.values.get(k, ("", 0))[0].strip()]
        if missing:
            raise SuspendConfError(f"{conf.path}: SuspendTime is set but {' and '.join(missing)} not: Slurm 22.05 then "
                                   "disables power saving ('power_save module disabled, NULL SuspendProgram', "
                                   "power_save.c _init_power_config); add them or turn power_saving off")

    def _duration(self, opt: str, timeout: Setting, key: str) -> Setting:
        v = getattr(self.opts, opt)
        if v is not None:
            return Setting(np.full(self.n, float(v)), f"option power_saving.{opt}")
        return Setting(timeout.value.copy(), f"= {key} (no power_saving.{opt} given)")

    def _watts(self) -> None:
        """State watts per node (W): options, else the system file's [power] keys, else idle (boot, shutdown)."""
        pm = self.power
        self.idle_w = pm.idle_node_w() if pm is not None else np.zeros(self.n)
        table = dict(getattr(self.system, "power", {}) or {}) if self.system is not None else {}
        spath = getattr(self.system, "path", "") or getattr(self.system, "name", "")
        self.watt_sources: dict[str, str] = {}
        groups = list(getattr(self.system, "node_groups", None) or []) if self.system is not None else []
        if sum(g["nodes"] for g in groups) != self.n:
            groups = []                                  # (the power model refuses a resized machine with groups)
        for key, sys_key in (("off_w", "node_off_w"), ("boot_w", "node_boot_w"), ("shutdown_w", "node_shutdown_w")):
            v = getattr(self.opts, key)
            per_group = [g["power"].get(sys_key, table.get(sys_key)) for g in groups]
            if v is not None:
                w, src = np.full(self.n, float(v)), f"option power_saving.{key}"
            elif groups and any(x is not None for x in per_group) and any(sys_key in g["power"] for g in groups):
                if any(x is None for x in per_group) and key == "off_w" and pm is not None:
                    g = groups[per_group.index(None)]
                    raise SuspendConfError(f"power_saving: the power of a powered-down {g['name']} node is not known: "
                                           f"give [power] or [[node_groups]] {sys_key} in system file {spath}, or "
                                           f"--set power_saving.off_w=WATTS")
                idle = self.idle_w
                w = np.concatenate([np.full(g["nodes"], float(x)) if x is not None else
                                    idle[sum(h["nodes"] for h in groups[:k]):][:g["nodes"]]
                                    for k, (g, x) in enumerate(zip(groups, per_group))])
                src = f"system file {spath} [[node_groups]] / [power] {sys_key}"
            elif sys_key in table:
                w, src = np.full(self.n, float(table[sys_key])), f"system file {spath} [power] {sys_key}"
            elif key == "off_w":
                if pm is not None:
                    raise SuspendConfError("power_saving: the power of a powered-down node is not known: give --set "
                                           "power_saving.off_w=WATTS (e.g. its BMC standby draw) or [power] "
                                           f"node_off_w in system file {spath}")
                w, src = np.zeros(self.n), "not used (no power model)"
            else:
                w, src = self.idle_w.copy(), "the node's idle power (assumed; no option or system key)"
            setattr(self, key, w)
            self.watt_sources[key] = src

    # ================================================================== events
    def _push(self, t: float, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (float(t), self._seq, kind, payload))

    def next_event(self, now: float) -> float | None:
        heap = self._heap
        while heap and heap[0][2] == SUSPEND and not self._suspendable(*heap[0][3]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _suspendable(self, node: int, ver: int) -> bool:
        return self.ver[node] == ver and self.state[node] == ON and self.held[node] == 0

    def on_event(self, now: float, control) -> None:
        self._advance(now, control)
        return None

    def _advance(self, now: float, control: Any = None) -> None:
        """Apply every event due at or before ``now``; without ``control`` (from a job hook) the events
        that need the engine (power-down, back in service) wait for this model's ``on_event`` at ``now``."""
        heap, later, suspend = self._heap, [], []
        while heap and heap[0][0] <= now:
            item = heapq.heappop(heap)
            t, _, kind, payload = item
            if kind in _NEEDS_CONTROL and control is None:
                later.append(item)
            elif kind == SUSPEND:
                if self._suspendable(*payload):
                    suspend.append(payload)
            elif kind == DOWNED:
                control.bring_up(_units_of(payload, self.upn))
                self._set_state(t, payload, OFF)
            elif kind == SHUTDOWN_DONE:
                self._set_power(t, payload, self.off_w[payload])
            elif kind == BOOT:
                self._boot(t, payload)
            elif kind == READY:
                self._set_state(t, payload, ON)
                self._set_power(t, payload, self.idle_w[payload])
            else:                                        # BEGIN: the job's run begins
                if self.power is not None:
                    self.power.start_deferred(t, payload)
        for item in later:
            heapq.heappush(heap, item)
        if suspend:
            self._suspend(now, sorted({n for n, _ in suspend}), control)

    def _window_slots(self, window: deque, rate: int, now: float, k: int) -> list[float]:
        """Times (s, >= now, non-decreasing) of ``k`` more state changes when at most ``rate`` may happen
        in any 60 s (``rate`` 0: all now); ``window`` holds the times of the recent ones (updated)."""
        out = []
        for _ in range(k):
            t = now
            if rate > 0:
                if len(window) >= rate:                  # the rate-th latest must be 60 s old
                    t = max(t, window[-rate] + RATE_WINDOW_S)
                if window and window[-1] > t:            # first come, first served
                    t = window[-1]
                window.append(t)
                while len(window) > rate:
                    window.popleft()
            out.append(t)
        return out

    def _suspend(self, now: float, nodes: list[int], control) -> None:
        """Nodes idle long enough start powering down (lowest first, SuspendRate permitting)."""
        rate = int(self.suspend_rate.value)
        # slots on a copy: a node over the rate is tested again at its slot (it may be busy by then)
        times = self._window_slots(deque(self._susp_window), rate, now, len(nodes)) if rate else [now] * len(nodes)
        go = np.array([n for n, t in zip(nodes, times) if t <= now], dtype=np.int64)
        for n, t in zip(nodes, times):
            if t > now:                                  # over the rate: at the next free slot
                self.counts["suspends_deferred_by_rate"] += 1
                self._push(t, SUSPEND, (n, int(self.ver[n])))
        if rate:
            self._window_slots(self._susp_window, rate, now, len(go))
        if not go.size:
            return
        self.counts["suspends"] += len(go)
        until = now + self.suspend_timeout.value[go] + 1.0
        for u in np.unique(until):                       # out of service until SuspendTimeout has passed
            grp = go[until == u]
            control.take_down(_units_of(grp, self.upn), float(u))
            self._push(u, DOWNED, grp)
        self._set_state(now, go, DOWNING)
        self._set_power(now, go, self.shutdown_w[go])
        done = now + self.shutdown_s.value[go]
        for u in np.unique(done):
            self._push(u, SHUTDOWN_DONE, go[done == u])

    def _boot(self, t: float, nodes: np.ndarray) -> None:
        self._set_state(t, nodes, BOOTING)
        self._set_power(t, nodes, self.boot_w[nodes])

    def _set_state(self, t: float, nodes: np.ndarray, new: int) -> None:
        nodes = np.atleast_1d(np.asarray(nodes, dtype=np.int64))
        old = self.state[nodes]
        d = {s: float((len(nodes) if new == s else 0) - np.count_nonzero(old == s)) for s in (DOWNING, OFF, BOOTING)}
        self.state[nodes] = new
        self._log_t.append(t)
        self._log_down.append(d[DOWNING])
        self._log_off.append(d[OFF])
        self._log_up.append(d[BOOTING])
        self._log_saved.append(0.0)

    def _set_power(self, t: float, nodes: np.ndarray, watts: np.ndarray) -> None:
        nodes = np.atleast_1d(np.asarray(nodes, dtype=np.int64))
        watts = np.broadcast_to(np.asarray(watts, dtype=float), nodes.shape)
        d_saved = float(np.sum(self._cur_w[nodes] - watts))
        self._cur_w[nodes] = watts
        self._log_t.append(t)
        self._log_down.append(0.0)
        self._log_off.append(0.0)
        self._log_up.append(0.0)
        self._log_saved.append(d_saved)
        if self.power is not None:
            self.power.set_free_node_power(t, nodes, watts)

    # ================================================================== job hooks
    def start_delay(self, now: float, job: int, units: np.ndarray) -> float | None:
        """Powered-down nodes of the job are resumed (ResumeRate permitting); its run begins when the
        last is up."""
        self._advance(now)
        units = np.asarray(units, dtype=np.int64)
        nodes, cnt = np.unique(units // self.upn, return_counts=True)
        self._nodes[job] = (nodes, cnt)
        self.held[nodes] += cnt
        self.ver[nodes] += 1
        ready = now
        off = nodes[self.state[nodes] == OFF]
        if off.size:
            rate = int(self.resume_rate.value)
            issue = (np.array(self._window_slots(self._resume_window, rate, now, len(off))) if rate
                     else np.full(len(off), now))
            self.counts["resumes"] += len(off)
            self.counts["resumes_deferred_by_rate"] += int(np.count_nonzero(issue > now))
            up = issue + self.boot_s.value[off]
            self.ready_at[off] = up
            for t in np.unique(issue):
                grp = off[issue == t]
                if t <= now:
                    self._boot(now, grp)
                else:
                    self._push(t, BOOT, grp)
            for t in np.unique(up):
                self._push(t, READY, off[up == t])
            ready = max(ready, float(up.max()))
        booting = nodes[self.state[nodes] == BOOTING]
        if booting.size:
            ready = max(ready, float(self.ready_at[booting].max()))
        delay = ready - now
        self.boot_delay[job] = delay
        if delay > 0:
            self.counts["jobs_delayed"] += 1
            self._push(now + delay, BEGIN, int(job))
            if self.power is not None:
                self.power.defer_start(job)
        return delay if delay > 0 else None

    def on_finish(self, now: float, job: int) -> None:
        self._advance(now)
        nodes, cnt = self._nodes.pop(job)
        self.held[nodes] -= cnt
        idle = nodes[self.held[nodes] == 0]
        st = self.suspend_time.value
        for i in idle[np.isfinite(st[idle]) & ~self.excluded[idle]]:
            self._push(now + st[i] + 1.0, SUSPEND, (int(i), int(self.ver[i])))
        return None

    # ================================================================== what policies may read
    def powered_down(self) -> np.ndarray:
        """Bool per node: powered down now (a job given it waits for its boot)."""
        return self.state == OFF

    # ================================================================== results
    def finalize(self, end: float) -> None:
        self.end = float(end)

    def _series(self):
        t = np.asarray(self._log_t, dtype=float)
        return t, [np.asarray(x, dtype=float) for x in (self._log_down, self._log_off, self._log_up, self._log_saved)]

    def job_columns(self) -> dict[str, np.ndarray]:
        return {"boot_delay_s": self.boot_delay}

    def timeseries(self, grid: np.ndarray, dt: float) -> dict[str, tuple[np.ndarray, str]]:
        grid = np.asarray(grid, dtype=float)
        if not len(grid):
            return {}
        edges = np.concatenate((grid, [grid[-1] + dt]))
        t, ds = self._series()
        down, off, up, saved = ss.interval_means(t, ds, [0.0, 0.0, 0.0, 0.0], edges)
        out = {"nodes_powering_down": (down, "nodes, average over [t, t+dt)"),
               "nodes_powered_down": (off, "nodes, average over [t, t+dt)"),
               "nodes_powering_up": (up, "nodes, average over [t, t+dt)")}
        if self.power is not None:
            out["power_saved_w"] = (saved, "W (node components) saved against the same nodes idle")
        return out

    def summary(self) -> dict:
        t, (down, off, up, saved) = self._series()
        t0 = self.power.t0 if self.power is not None else self.t0
        end = self.end

        def hours(d):
            return ss.integral(t, d, 0.0, t0, end) / 3600.0 if end > t0 else 0.0
        delays = self.boot_delay[self.boot_delay > 0]
        out = {
            "suspend_time_s": _scalar(self.suspend_time.value),
            "suspend_timeout_s": _scalar(self.suspend_timeout.value),
            "resume_timeout_s": _scalar(self.resume_timeout.value),
            "suspend_rate_per_min": int(self.suspend_rate.value),
            "resume_rate_per_min": int(self.resume_rate.value), "boot_s": _scalar(self.boot_s.value),
            "shutdown_s": _scalar(self.shutdown_s.value), "excluded_nodes": int(self.excluded.sum()),
            "sources": {"suspend_time": self.suspend_time.source, "suspend_timeout": self.suspend_timeout.source,
                        "resume_timeout": self.resume_timeout.source, "suspend_rate": self.suspend_rate.source,
                        "resume_rate": self.resume_rate.source, "boot_s": self.boot_s.source,
                        "shutdown_s": self.shutdown_s.source, "excluded": ", ".join(self.exc_sources) or "none"},
            **self.counts,
            "boot_delay_mean_s": float(delays.mean()) if delays.size else 0.0,
            "boot_delay_max_s": float(delays.max()) if delays.size else 0.0,
            "node_hours_powering_down": hours(down), "node_hours_powered_down": hours(off),
            "node_hours_powering_up": hours(up),
            "node_choice": ("the policy's (Slurm 22.05 prefers powered-up nodes: node_scheduler.c gives powered-down "
                            "nodes weight INFINITE-1; the twin's policies do not look at power states)"),
        }
        if self.power is not None:
            e_node = ss.integral(t, saved, 0.0, t0, end) if end > t0 else 0.0
            out["watts"] = {"off_w": _scalar(self.off_w), "boot_w": _scalar(self.boot_w),
                            "shutdown_w": _scalar(self.shutdown_w), "sources": dict(self.watt_sources)}
            out["energy_saved_node_kwh"] = e_node / 3.6e6
            out["energy_saved_rack_kwh"] = e_node * self.power.k_fac / 3.6e6
            out["energy_conventions"] = ("saved = energy the same nodes would have drawn idle minus what they drew "
                                         "powering down, powered down and booting (negative while a boot draws more "
                                         "than idle), over the power model's window; rack = node x the conversion "
                                         "chain's 1 / (dcdc x rectifier efficiency), exact for equal rectifier "
                                         "sharing; cooling not included")
        return {"power_saving": out}


def _units_of(nodes: np.ndarray, upn: int) -> np.ndarray:
    """The allocation units of ``nodes`` (``upn`` units a node)."""
    nodes = np.asarray(nodes, dtype=np.int64)
    if upn == 1:
        return nodes
    return (nodes[:, None] * upn + np.arange(upn)[None, :]).ravel()


def _scalar(a: np.ndarray) -> Any:
    """One value when every node has the same, else a list per node (JSON-ready)."""
    a = np.asarray(a, dtype=float)
    if a.ndim == 0:
        return float(a)
    if len(a) and np.all(a == a[0]):
        v = float(a[0])
        return v if math.isfinite(v) else None
    return [float(x) if math.isfinite(x) else None for x in a]


def build(setup) -> PowerSavingModel:
    """The model from a run's `twin.models.ModelSetup` (its ``power_saving`` and ``scheduler`` options)."""
    cfg = setup.cfg
    if (cfg.options.get("failures") or {}).get("enabled") is True:
        raise SuspendConfError("power_saving with --failures on is not supported yet (a node failing while it boots "
                               "or powers down follows Slurm's ResumeTimeout/requeue logic, not modelled)")
    if (cfg.options.get("serving") or {}).get("trace"):
        raise SuspendConfError("power_saving with a serving deployment is not supported yet")
    if setup.gpu:
        raise SuspendConfError("--allocation gpu does not support power_saving yet (the model works on whole nodes)")
    sys_power = dict(getattr(setup.system, "power", {}) or {}) if setup.system is not None else {}
    if cfg.power and (cfg.power_cap is not None or (cfg.options.get("power") or {}).get("facility_cap_w") is not None
                      or "facility_cap_w" in sys_power):
        raise SuspendConfError("power_saving with a facility power cap (--power-cap, power.facility_cap_w, [power] "
                               "facility_cap_w) is not supported yet: the cap's throttle does not see sleeping or "
                               "booting nodes")
    from dataclasses import fields  # noqa: PLC0415
    known = {f.name for f in fields(PowerSavingOptions)}
    opts = PowerSavingOptions(**{k: v for k, v in setup.options("power_saving").items() if k in known})
    conf = (cfg.options.get("scheduler") or {}).get("slurm_conf")
    return PowerSavingModel(opts, slurm_conf=conf, system=setup.system)

