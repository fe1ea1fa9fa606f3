"""Allocation strategies: what one unit of the machine is, and what that changes in a run.

``--allocation node`` (`NodeAllocation`, the default): a unit is a node (or a processor for SWF logs);
the placer of ``--placement`` picks a starting job's units. ``--allocation gpu`` (`GPUAllocation`): a
unit is a GPU (``unit = node x G + local GPU``), a job's size is its GPU count, and the policy is
wrapped in the GPU packer (`schedulers.gpu_packing.GPUPackingScheduler`, options ``--set gpu.KEY``)
unless its scheduler entry packs GPUs itself (``packs_gpus``); the results gain each job's node count
(``gpu_nodes``), the fragmentation summary and the free/fragmented GPU series.

A strategy is made by the run plan (`twin.plan`) from the configuration and the system, checked
there (before anything is loaded), and asked at fixed points of the run: `units` (machine size once
the workload is known), `scheduler_values` and `wrap` (composition), `placer`, `engine_groups`,
`job_columns`, `summary` and `series` (results). `ALLOCATIONS` is the table of strategies.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import RunConfigError
from .plugins import Entry, Table, option
from .ranges import parse_ranges


@dataclass(frozen=True)
class Units:
    """The machine's allocation units once the workload is known: the (possibly re-sized) workload,
    the number of units, where that number came from, units per node and the map unit-node -> group
    of the allocation (GPU allocation: per node; None otherwise)."""

    workload: Any
    total: int
    source: str
    per_node: int = 1
    groups: np.ndarray | None = None


def resolve_machine(cfg, wl_machine: int | None, system, system_explicit: bool = True) -> tuple[int, str]:
    """Machine size: --nodes, else an explicit --system, else the workload's own size (SWF header,
    synthetic model), else the default system."""
    if cfg.nodes is not None:
        if cfg.nodes < 1:
            raise RunConfigError(f"--nodes must be >= 1, got {cfg.nodes}")
        return int(cfg.nodes), "--nodes option"
    if system is not None and (system_explicit or not wl_machine):
        return system.nodes, f"system {system.name} ({system.path})"
    if wl_machine:
        return int(wl_machine), "workload" + (f" ({system.name} system's node model)" if system is not None else "")
    raise RunConfigError("machine size unknown: the workload has no MaxProcs/MaxNodes header; "
                         "give --nodes or --system")


def gpu_machine(workload) -> tuple[int, int, str] | None:
    """The machine a workload states for GPU allocation: (nodes, GPUs per node, description), or None.

    From the header fields of `hpctwin.datasets.gpu_traces.gpu_machine_header` (the Alibaba 2023
    trace's node list), else from a synthetic LLM workload's single ``gpus_per_node`` column with its
    machine size in nodes (``llm-synthetic``)."""
    h = workload.header
    try:
        n, g = int(h.get("GPUNodes", 0)), int(h.get("GPUsPerNode", 0))
    except ValueError:
        n = g = 0
    if n >= 1 and g >= 1:
        return n, g, h.get("GPUMachine") or f"{n} nodes x {g} GPUs"
    col = workload.columns.get("gpus_per_node")
    if (workload.name.startswith("llm-synthetic") and col is not None and len(col) and workload.machine_size
            and np.all(col == col[0]) and int(col[0]) >= 1):
        g, n = int(col[0]), int(workload.machine_size)
        return n, g, f"{workload.machine_size_source or 'generator'}: {n} nodes x {g} GPUs"
    return None


def workload_has_gpu_machine(cfg) -> bool:
    """Whether the workload of ``cfg`` will state its machine (`gpu_machine`), judged without loading it:
    a synthetic LLM workload, or an Alibaba GPU 2023 pod list with its node list beside it."""
    spec = getattr(cfg, "workload", None)
    if not isinstance(spec, str):
        return False
    if spec == "llm-synthetic" or spec.startswith("llm-synthetic:"):
        return True
    try:
        from .inputs import _alibaba_nodes, _workload_file  # noqa: PLC0415
        found = _workload_file(spec, getattr(cfg, "data_dir", None))
        return found is not None and _alibaba_nodes(*found) is not None
    except Exception:  # noqa: BLE001 - an unreadable spec: the early error stands, the run reports the rest
        return False


class NodeAllocation:
    """A unit is a node; placement by the ``--placement`` entry (see the module docstring)."""

    name = "node"
    gpu = False
    per_node = 1

    def __init__(self, cfg, system, placement: Entry):
        self.placement = placement

    def units(self, cfg, workload, system, system_explicit: bool) -> Units:
        total, source = resolve_machine(cfg, workload.machine_size, system, system_explicit)
        return Units(workload, total, source)

    def scheduler_values(self, units: Units) -> dict:
        """Run values a scheduler entry may take as option defaults (``from_run``)."""
        return {}

    def wrap(self, sched, entry, cfg, units: Units):
        return sched

    def placer(self, cfg, units: Units, system, notes: list[str], jobs, rng) -> tuple[Any, np.ndarray | None]:
        """The placer (None = the engine's built-in first-fit) and the node -> group map (or None).

        The group map needs the system's topology to hold ``total`` nodes; when it does not (a resized
        machine) and neither a topology-aware placement nor the network model asks for it, the run goes
        on without groups and says so in the notes.
        """
        total = units.total
        node_group = None
        needs_groups = not self.placement.tag("engine_default", False) or cfg.network
        if system is not None and system.network:
            from hpctwin.topology.presets import node_groups  # noqa: PLC0415
            try:
                node_group = node_groups(system.network, total, source=f"{system.path} [network]")
            except ValueError as e:
                if needs_groups:
                    raise
                notes.append(f"no network groups for {total} nodes ({e}); groups_spanned not reported")
        if not needs_groups:
            return None, node_group
        placer = self.placement.load()()
        placer.bind(total, node_group, rng, jobs)
        return placer, node_group

    def engine_groups(self, units: Units, node_group):
        return node_group

    def job_columns(self, df: dict, wl, res, models: list, units: Units) -> Any:
        return None

    def summary(self, summary: dict, state, units: Units) -> None:
        pass

    def series(self, ts: dict, grid: np.ndarray, state, units: Units) -> None:
        pass


@dataclass(frozen=True)
class GPUOptions:
    """``--set gpu.KEY``: the GPU packer wrapped around a policy under ``--allocation gpu``."""

    policy: str = option("best-fit", help="node choice of the packer: best-fit, first-fit or worst-fit")
    on_unpackable: str = option("skip", help="a start the packer cannot place: skip it this pass, or block")


class GPUAllocation(NodeAllocation):
    """A unit is a GPU (see the module docstring). ``gpus_per_node``: ``--gpus-per-node``, else the
    system's; what GPU allocation does not support yet is refused here, before anything is loaded."""

    name = "gpu"
    gpu = True

    def __init__(self, cfg, system, placement: Entry):
        super().__init__(cfg, system, placement)
        gpn = cfg.gpus_per_node or (system.gpus_per_node if system is not None else 0)
        if (not gpn or gpn < 1) and not workload_has_gpu_machine(cfg):
            missing = "the GPUs per node" + ("" if cfg.nodes is not None or system is not None else " and the nodes")
            raise RunConfigError(f"--allocation gpu needs {missing}: --gpus-per-node G"
                                 + ("" if cfg.nodes is not None or system is not None else " --nodes N")
                                 + ", or a --system whose gpus_per_node > 0 (or a workload that states its machine, "
                                   "such as the Alibaba GPU 2023 trace beside its node list)")
        unsupported = [name for name, on in (("--network on", cfg.network),
                                             ("--power-cap", cfg.power_cap is not None),
                                             (f"--placement {cfg.placement}", not placement.tag("engine_default")))
                       if on]
        if unsupported:
            raise RunConfigError(f"--allocation gpu does not support {', '.join(unsupported)} yet (those models "
                                 "and placers work on whole nodes; GPU jobs are placed by the gpu-pack policy)")
        self.per_node = int(gpn) if gpn and gpn >= 1 else 0      # 0: from the workload's machine (`units`)
        self.options = dict(cfg.options.get("gpu", {}))

    def units(self, cfg, workload, system, system_explicit: bool) -> Units:
        """A job's ``procs`` is its GPU count (``columns["gpus"]``, fractional requests rounded up)."""
        from hpctwin.topology.gpu_placement import whole_gpu_requests  # noqa: PLC0415
        meta = gpu_machine(workload)
        explicit_nodes = cfg.nodes is not None or (system is not None and system_explicit)
        if not self.per_node:
            if meta is None:
                raise RunConfigError(f"--allocation gpu needs the GPUs per node: --gpus-per-node G, or a --system "
                                     f"whose gpus_per_node > 0 (workload {workload.name!r} states no machine)")
            self.per_node = meta[1]
        gpn = self.per_node
        if "gpus" not in workload.columns:
            raise RunConfigError(f"--allocation gpu needs a per-job GPU count (workload column 'gpus'); "
                                 f"workload {workload.name!r} has none")
        counts, rounded, no_gpu = whole_gpu_requests(workload.columns["gpus"],
                                                     f"workload {workload.name} column 'gpus'")
        notes = list(workload.notes)
        notes.append(f"allocation gpu: units are GPUs (unit = node x {gpn} + local GPU); procs = the job's GPUs")
        if rounded:
            notes.append(f"{rounded} fractional GPU requests rounded up to whole GPUs (the engine does not share "
                         "a GPU)")
        if no_gpu:
            notes.append(f"{no_gpu} jobs ask for no GPU: skipped (size_le_0)")
        wl = dataclasses.replace(workload, procs=counts, notes=notes, machine_size=None)
        if cfg.nodes is not None:
            if cfg.nodes < 1:
                raise RunConfigError(f"--nodes must be >= 1, got {cfg.nodes}")
            nodes, src = int(cfg.nodes), "--nodes option"
        elif system is not None and system_explicit:
            nodes, src = system.nodes, f"system {system.name} ({system.path})"
        elif meta is not None and meta[1] == gpn:
            nodes, src = meta[0], "the workload's machine (see the notes)"
        elif meta is not None:
            nodes = -(-meta[0] * meta[1] // gpn)
            src = f"the workload's machine (see the notes): its {meta[0] * meta[1]:,} GPUs in {gpn}-GPU nodes"
        else:
            raise RunConfigError("--allocation gpu: machine size unknown: give --nodes (nodes) or --system")
        if meta is not None and (not cfg.gpus_per_node or not explicit_nodes):
            used = [x for x, given in (("--gpus-per-node", cfg.gpus_per_node), ("--nodes", explicit_nodes))
                    if not given]
            notes.append(f"allocation gpu: {' and '.join(used)} from the workload's machine ({meta[2]}); "
                         "give them to model another machine")
        node_group = None
        if system is not None and system.network:
            from hpctwin.topology.presets import node_groups  # noqa: PLC0415
            try:
                node_group = node_groups(system.network, nodes, source=f"{system.path} [network]")
            except ValueError as e:
                notes.append(f"no network groups for {nodes} nodes ({e}): multi-node GPU jobs take the lowest "
                             "free nodes")
        return Units(wl, nodes * gpn, f"{src}: {nodes} nodes x {gpn} GPUs", gpn, node_group)

    def scheduler_values(self, units: Units) -> dict:
        return {"gpus_per_node": units.per_node, "node_group": units.groups}

    def wrap(self, sched, entry, cfg, units: Units):
        """The policy packed onto GPUs: a policy that packs GPUs itself is checked against the machine's
        GPUs per node; any other is wrapped in the packer with the ``gpu`` options."""
        if entry.packs_gpus or getattr(sched, "packs_gpus", False):
            if sched.gpus_per_node != units.per_node:
                raise RunConfigError(f"scheduler option gpus_per_node = {sched.gpus_per_node} differs from the "
                                     f"machine's {units.per_node} GPUs per node")
            return sched
        from hpctwin.schedulers.gpu_packing import GPUPackingScheduler  # noqa: PLC0415
        return GPUPackingScheduler(inner=sched, policy=self.options.get("policy", "best-fit"),
                                   gpus_per_node=units.per_node, node_group=units.groups,
                                   on_unpackable=self.options.get("on_unpackable", "skip"))

    def placer(self, cfg, units: Units, system, notes: list[str], jobs, rng):
        return None, None                  # the packer returns the units of every start

    def engine_groups(self, units: Units, node_group):
        return units.groups

    def job_columns(self, df: dict, wl, res, models: list, units: Units) -> Any:
        """``gpu_nodes`` (distinct nodes a job held) added to ``df``; returns the occupancy rows and the
        fragmentation summary for `summary` and `series`."""
        from .fragmentation import fragmentation_series  # noqa: PLC0415
        gpn, total = units.per_node, units.total
        held = [parse_ranges(x) for x in df["nodes"]]
        rows = f_sub, f_start, f_end, f_units, f_gpus = occupancy_rows(wl, res, held, models, gpn)
        lens = np.fromiter((len(u) for u in held), dtype=np.int64, count=len(held))
        if lens.sum():                           # distinct nodes per job, without a per-job np.unique
            key = np.unique(np.repeat(np.arange(len(held)), lens) * (total // gpn) + np.concatenate(held) // gpn)
            df["gpu_nodes"] = np.bincount(key // (total // gpn), minlength=len(held))
        else:
            df["gpu_nodes"] = np.zeros(len(held), dtype=np.int64)
        frag = fragmentation_series(f_sub, f_start, f_end, f_units, f_gpus, gpn, total)
        return rows, frag

    def summary(self, summary: dict, state, units: Units) -> None:
        summary["allocation"] = {"units": "gpu", "gpus_per_node": units.per_node,
                                 "nodes": units.total // units.per_node}
        summary["gpu_fragmentation"] = state[1].summary()

    def series(self, ts: dict, grid: np.ndarray, state, units: Units) -> None:
        from .fragmentation import fragmentation_series  # noqa: PLC0415
        f_sub, f_start, f_end, f_units, f_gpus = state[0]
        on_grid = fragmentation_series(f_sub, f_start, f_end, f_units, f_gpus, units.per_node, units.total, times=grid)
        ts["fragmented_gpus"] = (on_grid.fragmented.astype(np.int32),
                                 "GPUs free but unusable by every waiting job, at time t")
        ts["free_gpus"] = (on_grid.free.astype(np.int32), "GPUs free at time t")


def occupancy_rows(wl, res, held: list, models: list, gpn: int):
    """Per-(job run) rows for the fragmentation metric: (submit, start, end, units, GPUs).

    Without failures, one row a job. With failures, a requeued job gives one row per run, the
    run's "submit" being the time it (re)entered the queue (so it counts as waiting in between),
    and every node outage gives a row that holds the node's GPUs from its failure to its repair and
    never waits."""
    outages = [o for m in models for o in (getattr(m, "outages", None) or ())]     # models taking nodes down
    if not res.segments and not outages:
        return wl.submit, res.start, res.end, held, wl.procs
    sub, st, en, un, g = [], [], [], [], []
    prev_end: dict[int, float] = {}
    for j, s0, e0, txt in res.segments:
        sub.append(prev_end.get(j, float(wl.submit[j])))
        st.append(s0); en.append(e0); un.append(parse_ranges(txt)); g.append(int(wl.procs[j]))
        prev_end[j] = e0
    last = res.last_start if res.last_start is not None else res.start
    for j in range(len(wl.submit)):
        if res.failed is not None and res.failed[j]:
            continue                              # its last run is among the interrupted segments
        sub.append(prev_end.get(j, float(wl.submit[j])))
        st.append(float(last[j])); en.append(float(res.end[j])); un.append(held[j]); g.append(int(wl.procs[j]))
    t_end = float(np.nanmax(res.end)) if np.isfinite(res.end).any() else 0.0
    for node, t0, t1 in outages:
        if t0 > t_end:
            continue
        sub.append(t0); st.append(t0); en.append(min(t1, t_end))
        un.append(np.arange(node * gpn, (node + 1) * gpn)); g.append(gpn)
    return (np.asarray(sub, dtype=float), np.asarray(st, dtype=float), np.asarray(en, dtype=float), un,
            np.asarray(g, dtype=np.int64))


#: the allocation table: ``--allocation NAME`` -> strategy class (made by the plan as
#: ``factory(cfg, system, placement entry)``); ``options``: the ``--set`` section it reads (tags ``section``
#: and ``noun``, how an error names them)
ALLOCATIONS = Table("allocation")
ALLOCATIONS.register(Entry("node", NodeAllocation, doc="a unit is a node (or a processor of an SWF log)"))
ALLOCATIONS.register(Entry("gpu", GPUAllocation, options=GPUOptions, tags={"section": "gpu", "noun": "GPU packing"},
                           doc="a unit is a GPU; jobs packed by the GPU packer"))
