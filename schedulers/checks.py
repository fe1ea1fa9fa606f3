"""Conformance suite for schedulers, after scikit-learn's ``check_estimator``.

`check_scheduler(target)` yields ``(name, check)`` pairs; each ``check()`` runs the scheduler through
the real engine on small generated workloads and raises `ConformanceError` (an AssertionError)
naming the scheduler, the workload, the job and the time when a rule is broken. `targets()` lists
every registered scheduler (each built-in name, every queue order x backfill pair, the Slurm-like
policy's variants, every name of `schedulers.registry.known_schedulers`, including entry points)
plus the wrappers, so a name added to the registry is checked with no test edit.

Checks every scheduler gets (DESIGN.md sections 4 to 6):

* ``exclusive_units``: no unit is held by two jobs at once; units exist (0 <= u < machine units);
  a job holds exactly its requested number of units (capacity is then never exceeded);
* ``no_start_before_submit``;
* ``every_job_accounted``: every job of the log runs to an end or is reported unrunnable (counted
  in ``jobs_skipped``); the engine raises on a deadlock;
* ``walltime``: a job whose runtime exceeds its requested time ends at start + requested time with
  status ``killed``; at full speed (no rate-changing model) every other job runs exactly its runtime;
* ``deterministic``: the same configuration twice gives identical start, end and units for every job;
* ``overrun``: with ``kill_at_walltime = false`` jobs outlive their estimates; the scheduler must
  still never start a job on units that are still held (it must read the view, not trust its plan).
* ``cancel``: a model withdraws waiting jobs (`twin.control.EngineControl.cancel`; `Canceller`: the
  FCFS head and the newest waiting job at fixed times): they never start and are CANCELLED, every
  other job runs to an end, units are never held twice; ``cancel_frees`` (`cancel_probe`): the
  withdrawn job leaves no trace in the policy's plan (a policy's own queue state, reservations or
  counters, must let the job go: ``on_cancel``).

Checks a scheduler gets when it declares them (tags, like scikit-learn's estimator tags):

* ``shares_nodes`` (jobs share nodes unit by unit: the Slurm-like select/cons_tres): ``tres_exclusive``,
  no GPU is used by two jobs at once and the memory held on a node never exceeds its RealMemory, read
  from the jobs table's ``gpus_alloc`` and ``mem_alloc_mb`` columns (`assert_tres_exclusive`);

* ``guarantees`` (a set-like attribute of the scheduler): ``"easy_head"`` (EASY, Mu'alem and
  Feitelson 2001: the first job that cannot start gets a reservation at its shadow time, computed
  from the running jobs' expected ends, and never starts later than it); ``"conservative"`` (every
  waiting job's first reservation is never delayed). A scheduler declaring either must record
  reservations in ``first_reservation`` (a dict job index -> first reserved start, s) when the
  suite sets it to ``{}`` before the run. For ``easy_head`` the suite recomputes the shadow time
  independently from the view the scheduler was given and, for FCFS order (``order_name ==
  "fcfs"``), checks that the reserved job is the first waiting job in arrival order.
* ``supports_failures`` (attribute, default True; False on the scheduler or any policy it wraps
  through ``inner`` opts out): under random node failures (`twin.failures.FailureModel`) no job
  runs on a down unit, no unit is held twice, and for every job that completes, time queued + time
  held = end - submit. Policies that need a run of their own (power, GPU allocation, an LLM system)
  are checked through the run's ``failures`` options instead (as ``--failures on``; the outages are
  not in the run's results there, so the unit check covers the jobs never interrupted).

Which targets there are and which run each needs are read from the scheduler table
(`schedulers.registry.SCHEDULERS`), as `twin.plan` does: every name of ``known_schedulers()`` is a
target (the built-in order x backfill names through the whole grid, ``queue``; an entry's
``check_variants`` gives several configurations, the Slurm-like policy's); a model the entry (or the
built object's ``needs_models``) needs is switched on by the ``switch`` of the model entry that
provides it (the power model: ``power = True``, on the `SYSTEM` machine since it needs a system
table); an entry needing GPU allocation runs with ``allocation = "gpu"``; ``check_with`` adds the run
fields an entry is best checked with (the LLM-aware policy: the ``dgx-h100`` system for its node
groups). Guarantees and ``supports_failures`` are the entry's declarations joined with the object's.

Workloads (`workloads`): a few dozen jobs on 16 units, generated with a fixed seed: ``mixed``
(Poisson arrivals, sizes 1-16 skewed small, runtimes 1 s-2 h, requested times 0.6-3x the runtime so
some jobs are killed, a few with no request), ``burst`` (every job at two instants: ties) and
``exact`` (requested = runtime, so reservations are exact). Every job also has a GPU count (= its
size, for GPU allocation) and a ``job_class`` (30 % LLM training, for the LLM-aware policy). A check
takes about 0.01-0.5 s.
"""
from __future__ import annotations

import copy
import functools
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from hpctwin.twin.workload import Workload

#: declared guarantees this suite knows how to check
KNOWN_GUARANTEES = frozenset({"easy_head", "conservative"})
#: machine size (units) of the generated workloads
UNITS = 16
#: GPUs per node in the GPU-allocation runs (2 nodes x 8 GPUs = 16 units)
GPUS_PER_NODE = 8
#: machine of the runs whose policy needs a model with a system table (every built-in system has them all)
SYSTEM = "generic"
#: facility cap (W) of the power-cap targets: between the idle (8.7 kW) and all-busy (15.1 kW) power of
#: 16 generic nodes, below the uncapped peak of the workloads (14.5 kW on "mixed"), so starts are refused
POWER_CAP_W = 14000.0


class ConformanceError(AssertionError):
    """A scheduler broke a rule of the conformance suite."""


@dataclass
class Target:
    """A scheduler to check, given as the run configuration that builds it.

    ``scheduler``, ``order``, ``backfill`` and ``options`` (scheduler options) go to
    `schedulers.registry.make_scheduler`; ``run`` holds other `twin.run.RunConfig` fields (power,
    system, allocation, power_cap...). ``label`` names the target in test ids and errors.
    """

    label: str
    scheduler: str
    order: str | None = None
    backfill: str | None = None
    options: dict = field(default_factory=dict)
    run: dict = field(default_factory=dict)
    #: why the scheduler could not be built when the target was listed (None: it could)
    error: str | None = None
    #: added to the generated workloads' names for this target (``+slurm``: with the Slurm columns of
    #: `slurm_columns`: partitions, QOS, users, a reservation); "" none
    workload_suffix: str = ""

    def wl(self, workload: str) -> str:
        """The name of ``workload`` for this target (`workload_suffix` before any ``#units``)."""
        if not self.workload_suffix or workload == "cancel-probe":
            return workload
        base, h, units = workload.partition("#")
        return base + self.workload_suffix + h + units

    def key(self) -> str:
        return json.dumps([self.label, self.scheduler, self.order, self.backfill, self.options, self.run],
                          sort_keys=True, default=str)

    def make(self):
        from hpctwin.schedulers.registry import make_scheduler  # noqa: PLC0415
        return make_scheduler(self.scheduler, self.order, self.backfill, copy.deepcopy(self.options))

    def entry(self):
        """The scheduler's table entry (`schedulers.registry.SchedulerEntry`)."""
        from hpctwin.schedulers.registry import scheduler_entry  # noqa: PLC0415
        return scheduler_entry(self.scheduler)

    def tags(self) -> dict:
        """`scheduler_tags` of the built scheduler joined with its entry's declarations (the entry's
        guarantees hold for its own order and backfill only)."""
        entry = self.entry()
        declared = entry.guarantees if self.order is None and self.backfill is None else frozenset()
        return scheduler_tags(self.make(), declared, entry.supports_failures)


# ====================================================================== tags
def _chain(sched) -> Iterator[Any]:
    while sched is not None:
        yield sched
        sched = getattr(sched, "inner", None)


def scheduler_tags(sched, declared: frozenset = frozenset(), supports_failures: bool = True) -> dict:
    """The tags of a scheduler object: ``guarantees`` (frozenset of `KNOWN_GUARANTEES` names, with the
    entry's ``declared`` ones) and ``supports_failures`` (False when its entry, it or a policy it wraps
    says so), ``units_per_node`` (units of one node the policy allocates whole:
    `schedulers.slurm.SlurmScheduler.cpn`, else 1)."""
    g = frozenset(getattr(sched, "guarantees", None) or ()) | frozenset(declared)
    unknown = g - KNOWN_GUARANTEES
    if unknown:
        raise ConformanceError(f"scheduler {getattr(sched, 'name', sched)!r} declares unknown guarantees "
                               f"{sorted(unknown)}; known: {sorted(KNOWN_GUARANTEES)}")
    return {"guarantees": g,
            "supports_failures": supports_failures and all(getattr(s, "supports_failures", True) is not False
                                                           for s in _chain(sched)),
            # whole-node allocation of a policy whose node has several units (Slurm's cpus_per_node)
            "units_per_node": int(getattr(sched, "cpn", None) or 1),
            # a policy whose jobs share nodes unit by unit (Slurm's select/cons_tres): units, not nodes, are checked
            "shares_nodes": bool(getattr(sched, "shares_nodes", False)),
            # a policy that preempts running jobs (Slurm's PreemptType): every run of a job is checked
            "preempts": bool(getattr(getattr(sched, "pre", None), "enabled", False)),
            # a policy with advance reservations (Slurm's scontrol create reservation)
            "reservations": bool(getattr(getattr(sched, "resv_opts", None), "specs", None))}


def run_requirements(entry, sched=None) -> dict:
    """`RunConfig` fields a scheduler needs, read from its table entry (and the built object's
    ``needs_models``): the switch of each model that provides what it needs (on the `SYSTEM` machine
    when that model needs a system table), GPU allocation, the entry's ``check_with`` fields."""
    from hpctwin.twin.models import providers  # noqa: PLC0415
    req: dict = {}
    needs = list(entry.needs.models) + list(getattr(sched, "needs_models", None) or ())
    for need in dict.fromkeys(needs):
        for model in providers(need)[:1]:
            req.update(copy.deepcopy(dict(model.switch)))
            if any(r.startswith("system.") for r in model.requires):
                req.setdefault("system", SYSTEM)
    if entry.needs.allocation == "gpu":
        req.update(allocation="gpu", gpus_per_node=GPUS_PER_NODE)
    req.update(entry.check_with)
    return req


def target_for(label: str, scheduler: str, order: str | None = None, backfill: str | None = None,
               options: dict | None = None, run: dict | None = None) -> Target:
    """A `Target` whose run fields include what the scheduler needs (`run_requirements`)."""
    t = Target(label, scheduler, order, backfill, dict(options or {}), {})
    try:
        t.run = {**run_requirements(t.entry(), t.make()), **(run or {})}
    except Exception as e:  # noqa: BLE001 - reported by the "constructs" check, not at collection
        t.run = dict(run or {})
        t.error = f"{type(e).__name__}: {e}"
    return t


# ====================================================================== targets
def slurm_variants() -> dict[str, dict]:
    """Slurm-like configurations to check, as scheduler options by label.

    Read from ``schedulers.slurm.CONFORMANCE_VARIANTS`` when the module defines it (its owners list
    the SelectType / priority combinations there); otherwise the default configuration, each modelled
    ``PriorityType``, the builtin (no backfill) scheduler type, and a tight backfill configuration
    (the parameter ranges of the former random Slurm property test).
    """
    from hpctwin.schedulers import slurm as slurm_mod  # noqa: PLC0415
    declared = getattr(slurm_mod, "CONFORMANCE_VARIANTS", None)
    if declared:
        return {**{str(k): dict(v) for k, v in dict(declared).items()}, **slurm_resv_preempt_variants()}
    return {
        "slurm": {},
        "slurm[priority/basic]": {"PriorityType": "priority/basic"},
        "slurm[sched/builtin]": {"SchedulerType": "sched/builtin"},
        "slurm[tight-backfill]": {"bf_interval": 7, "bf_resolution": 60, "bf_window": 1, "bf_max_job_test": 2,
                                  "bf_job_part_count_reserve": 2, "default_queue_depth": 1,
                                  "node_order": "index", "PriorityWeightAge": 1000,
                                  "PriorityWeightJobSize": 1000, "PriorityWeightFairshare": 10000,
                                  "PriorityCalcPeriod": 5, "PriorityFlags": "NO_FAIR_TREE"},
        "slurm[cpus_per_node=2]": {"cpus_per_node": 2, "bf_job_part_count_reserve": 1,
                                   "PriorityWeightFairshare": 10000},
    }


#: slurm.conf lines of the preemption and reservation variants (16 one-CPU nodes n01-n16 = `UNITS`)
_NODES16 = "NodeName=n[01-16] CPUs=1\n"
_PARTS = ("PartitionName=low Nodes=n[01-16] PriorityTier=1 Default=YES\n"
          "PartitionName=high Nodes=n[01-16] PriorityTier=10 PreemptMode=OFF\n")
#: accounts file of the QOS preemption variant (schedulers.slurm_priority format)
_QOS_ACCOUNTS = '[qos.normal]\nPriority = 10\n[qos.high]\nPriority = 100\nPreempt = "normal"\n'


def _conf_file(name: str, text: str) -> str:
    """Write ``text`` once to a file of the temporary directory named by its content (a variant's
    slurm.conf or accounts file; the same text gives the same path, so target keys are stable)."""
    import hashlib  # noqa: PLC0415
    import tempfile  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415
    d = Path(tempfile.gettempdir()) / "hpctwin-conformance"
    d.mkdir(parents=True, exist_ok=True)
    f = d / f"{name}-{hashlib.sha1(text.encode()).hexdigest()[:12]}"
    if not f.exists() or f.read_text() != text:       # written aside and renamed: concurrent runs never
        tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")  # read a half-written file
        tmp.write_text(text)
        os.replace(tmp, f)
    return str(f)


def slurm_resv_preempt_variants() -> dict[str, dict]:
    """Slurm-like configurations with preemption and advance reservations (issue 27), run on the
    generated workloads with the Slurm columns (``"_workloads": "+slurm"``, `slurm_columns`): every
    fourth job in partition ``high`` (PriorityTier 10, not preemptable) over ``low`` (tier 1), every
    fourth (another) in QOS ``high`` (Preempt=normal), and, where ``proj`` exists, some small jobs in
    it. Their slurm.conf and accounts files are written to the temporary directory (`_conf_file`)."""
    prio = "PreemptType=preempt/partition_prio\nAuthInfo=cred_expire=10\n"
    maint = {"name": "maint", "start": 1200, "duration": 20, "nodes": "n[01-08]", "flags": "MAINT",
             "users": "root"}
    proj = {"name": "proj", "start": 600, "duration": 30, "nodes": "n[09-12]", "flags": "DAILY",
            "users": "u0,u1,u2,u3"}
    shared = ("SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nNodeName=n[01-08] CPUs=2\n"
              + _PARTS.replace("n[01-16]", "n[01-08]"))
    return {
        "slurm[partition_prio REQUEUE]": {
            "slurm_conf": _conf_file("prio-requeue.conf", prio + "PreemptMode=REQUEUE\n" + _NODES16 + _PARTS),
            "job_reservations": "ignore", "_workloads": "+slurm"},
        "slurm[partition_prio CANCEL, cons_tres shared]": {
            "slurm_conf": _conf_file("prio-cancel.conf", prio + "PreemptMode=CANCEL\n" + shared),
            "job_reservations": "ignore", "_workloads": "+slurm"},
        "slurm[qos REQUEUE, PreemptExemptTime]": {
            "slurm_conf": _conf_file("qos.conf", "PreemptType=preempt/qos\nPreemptMode=REQUEUE\n"
                                     "PreemptExemptTime=00:05:00\nAuthInfo=cred_expire=10\n" + _NODES16),
            "accounts": _conf_file("qos-accounts.toml", _QOS_ACCOUNTS),
            "job_reservations": "ignore", "_workloads": "+slurm"},
        "slurm[MAINT reservation]": {
            "slurm_conf": _conf_file("nodes16.conf", _NODES16), "reservations": [maint],
            "job_reservations": "ignore", "_workloads": "+slurm"},
        "slurm[user reservation DAILY, select/cons_tres]": {
            "slurm_conf": _conf_file("cons16.conf", "SelectType=select/cons_tres\n" + _NODES16),
            "reservations": [proj, maint], "_workloads": "+slurm"},
    }


def slurm_columns(wl: Workload) -> Workload:
    """``wl`` with the columns the Slurm preemption and reservation variants read: ``partition_name``
    (``high`` for jobs 3, 7, 11, ... by index, else ``low``), ``qos_name`` (``high`` for jobs 1, 5, 9,
    ..., else ``normal``), ``user_name`` (``u`` + user) and ``reservation`` (``proj`` for jobs 2, 7, 12,
    ... of at most 4 units, else none)."""
    n = len(wl)
    i = np.arange(n)
    cols = dict(wl.columns or {})
    cols["partition_name"] = np.where(i % 4 == 3, "high", "low").astype(object)
    cols["qos_name"] = np.where(i % 4 == 1, "high", "normal").astype(object)
    cols["user_name"] = np.array([f"u{int(u)}" for u in np.asarray(wl.user)], dtype=object)
    cols["reservation"] = np.where((i % 5 == 2) & (np.asarray(wl.procs) <= 4), "proj", "").astype(object)
    return Workload.from_arrays(wl.name + "+slurm", submit=wl.submit, runtime=wl.runtime, procs=wl.procs,
                                requested_time=wl.requested_time, user=wl.user, group=wl.group,
                                job_id=wl.job_id, columns=cols, machine_size=wl.machine_size)


def targets() -> list[Target]:
    """Every registered scheduler and wrapper, each with the run it needs."""
    from hpctwin.schedulers import registry  # noqa: PLC0415 - known_schedulers read at call time
    from hpctwin.schedulers.backfill import BACKFILLS  # noqa: PLC0415
    from hpctwin.schedulers.ordering import ORDERS  # noqa: PLC0415
    from hpctwin.twin.plugins import resolve  # noqa: PLC0415
    out: list[Target] = []

    def add(t: Target) -> None:
        out.append(t)

    grid: dict[tuple, str] = {}
    for name in registry.known_schedulers():
        try:
            entry = registry.scheduler_entry(name)
        except Exception:  # noqa: BLE001 - reported by the "constructs" check of its target
            add(target_for(name, name))
            continue
        if entry.queue is not None:         # a built-in order x backfill name: checked through the grid below
            grid.setdefault(entry.queue, name)
            continue
        if entry.check_variants:
            for label, opts in resolve(entry.check_variants)().items():
                opts = dict(opts)
                suffix = str(opts.pop("_workloads", ""))     # a variant's own workloads (`slurm_columns`)
                t = target_for(label, name, options=opts)
                t.workload_suffix = suffix
                add(t)
            continue
        add(target_for(name, name))
    for order in ORDERS:
        for backfill in BACKFILLS:
            label = grid.get((order, backfill), f"{order}+{backfill}")
            add(target_for(label, "fcfs", order=order, backfill=backfill))
    # wrappers
    # the power cap: the engine gate (--power-cap) and the wrapper policy built by name
    for inner in ("easy", "conservative"):
        add(target_for(f"power-cap-gate({inner})", inner, run={"power": True, "system": "generic",
                                                             "power_cap": POWER_CAP_W}))
        add(target_for(f"power-aware({inner})", "hpctwin.schedulers.power_aware:PowerAwareScheduler",
                       options={"inner": inner, "cap": POWER_CAP_W},
                       run={"options": {"power": {"facility_cap_w": POWER_CAP_W}}}))
    add(target_for("energy-fairshare", "hpctwin.power.accounting:EnergyFairShare"))
    add(target_for("llm(conservative)", "llm", backfill="conservative"))
    add(target_for("gpu-pack(block)", "gpu-pack", options={"on_unpackable": "block"}))
    add(target_for("easy+gpu-allocation", "easy", run={"allocation": "gpu", "gpus_per_node": GPUS_PER_NODE}))
    return out


# ====================================================================== workloads
def workloads(units: int = UNITS, seed: int = 7) -> dict[str, Workload]:
    """The generated workloads (see the module docstring); deterministic for a given seed."""
    rng = np.random.default_rng(seed)
    out = {}
    n = 48
    submit = np.cumsum(rng.exponential(60.0, n)).round()
    runtime = np.maximum(1.0, np.exp(rng.uniform(0.0, math.log(7200.0), n)).round())
    procs = np.minimum(units, np.maximum(1, (units * rng.power(0.35, n)).round())).astype(int)
    req = (runtime * rng.uniform(0.6, 3.0, n)).round()
    req[rng.random(n) < 0.08] = np.nan
    req = np.where(np.isnan(req), np.nan, np.maximum(req, 1.0))
    out["mixed"] = _make("mixed", submit, runtime, procs, req, rng, units)
    n = 30
    submit = np.where(np.arange(n) < 18, 0.0, 600.0)
    runtime = rng.integers(1, 1500, n).astype(float)
    procs = rng.integers(1, units + 1, n)
    req = (runtime * rng.uniform(0.8, 2.0, n)).round()
    out["burst"] = _make("burst", submit, runtime, procs, np.maximum(req, 1.0), rng, units)
    n = 36
    submit = np.cumsum(rng.exponential(200.0, n)).round()
    runtime = rng.integers(10, 3000, n).astype(float)
    procs = rng.integers(1, units + 1, n)
    out["exact"] = _make("exact", submit, runtime, procs, runtime.copy(), rng, units)
    return out


def _make(name, submit, runtime, procs, req, rng, units=UNITS) -> Workload:
    n = len(submit)
    job_class = rng.choice(np.array(["hpc_batch", "llm_pretrain", "llm_finetune"], dtype=object), n,
                           p=[0.7, 0.2, 0.1])
    return Workload.from_arrays(f"conformance-{name}", submit=submit, runtime=runtime, procs=procs,
                                requested_time=req, user=rng.integers(0, 4, n), group=rng.integers(0, 2, n),
                                columns={"gpus": np.asarray(procs, dtype=float), "job_class": job_class},
                                machine_size=units)


def units_of(name: str) -> int:
    """Machine units of a workload name: ``mixed#4`` runs on 4 units, ``mixed`` on `UNITS`."""
    _, _, units = name.partition("#")
    return int(units) if units else UNITS


class _ByName(dict):
    """Workloads by name: ``mixed`` (seed 7), ``mixed@K`` (the same generator with seed K),
    ``mixed@K#U`` or ``mixed#U`` (for a machine of U units); ``+slurm`` before ``#`` adds the Slurm
    columns (`slurm_columns`)."""

    def __missing__(self, name: str) -> Workload:
        head, _, _ = name.partition("#")
        head, plus, extra = head.partition("+")
        base, _, seed = head.partition("@")
        add = _SUFFIXES.get(extra) if plus else None
        if plus and add is None:
            raise KeyError(f"workload {name!r}: unknown suffix +{extra} (known: "
                           f"{', '.join('+' + k for k in _SUFFIXES)})")
        wl = workloads(units=units_of(name), seed=int(seed) if seed else 7)[base]
        if add is not None:
            wl = add(wl)
        self[name] = wl
        return wl


#: workload-name suffixes (``mixed+NAME``): what each adds to the generated workload
_SUFFIXES = {"slurm": lambda wl: slurm_columns(wl)}


@functools.lru_cache(maxsize=1)
def _workloads() -> dict[str, Workload]:
    return _ByName()


# ====================================================================== running
@dataclass
class Outcome:
    """One run of a target: the jobs table (`twin.run.RunResult.jobs`) and the summary."""

    jobs: Any
    summary: dict
    wall_s: float = 0.0


def run_target(target: Target, workload: str, *, fresh: bool = False) -> Outcome:
    """Run ``target`` on a generated workload through `twin.run.simulate` (cached unless ``fresh``)."""
    if fresh:
        return _run(target.key(), workload)
    return _run_cached(target.key(), workload)


def _run(key: str, workload: str) -> Outcome:
    import time  # noqa: PLC0415

    from hpctwin.twin.run import RunConfig, simulate  # noqa: PLC0415
    label, scheduler, order, backfill, options, run = json.loads(key)
    t0 = time.perf_counter()
    cfg = RunConfig(workload=f"conformance-{workload.replace('@', '-seed').replace('#', '-units')}",
                    scheduler=scheduler, order=order, backfill=backfill,
                    nodes=units_of(workload) // GPUS_PER_NODE if run.get("allocation") == "gpu" else units_of(workload),
                    options={**run.pop("options", {}), **({"scheduler": options} if options else {})}, **run)
    res = simulate(cfg, copy.deepcopy(_workloads()[workload]))
    return Outcome(res.jobs, res.summary, time.perf_counter() - t0)


_run_cached = functools.lru_cache(maxsize=256)(_run)


def _fail(target: Target, workload: str, msg: str) -> None:
    raise ConformanceError(f"scheduler {target.label!r} on workload {workload!r}: {msg}")


# ====================================================================== generic checks
def _units_of(text: str) -> np.ndarray:
    from hpctwin.twin.ranges import parse_ranges  # noqa: PLC0415
    return np.asarray(parse_ranges(text), dtype=np.int64) if text else np.zeros(0, dtype=np.int64)


def _overlaps(rows: list[tuple[int, float, float, str]]) -> str | None:
    """First pair of (unit, start, end, who) intervals sharing a unit at the same time, as text."""
    rows = sorted(rows)
    for a, b in zip(rows, rows[1:]):
        if a[0] == b[0] and b[1] < a[2]:
            return f"{a[0]}: {a[3]} holds [{a[1]:g}, {a[2]:g}) s and {b[3]} holds [{b[1]:g}, {b[2]:g}) s"
    return None


def assert_exclusive_units(df, total: int, where: str = "run", units_per_node: int = 1) -> None:
    """Raise `ConformanceError` unless every job of the jobs table ``df`` (columns job_id, start,
    end, procs, nodes) holds exactly ``procs`` distinct units in ``0..total-1`` and no unit (or, with
    ``units_per_node`` > 1, no node of that many units: whole-node allocation) is held by two jobs
    at the same time."""
    rows = []
    # a job preempted and requeued held other units in [start, its last run's start): its runs are
    # checked one by one by `check_preemption` (the engine's segments), here only its last units
    pre = np.asarray(df["preemptions"]) if "preemptions" in getattr(df, "columns", ()) else np.zeros(len(df))
    for jid, s, e, p, txt, npre in zip(df.job_id, df.start, df.end, df.procs, df.nodes, pre):
        if not np.isfinite(s):
            continue
        u = _units_of(txt)
        if len(u) != p:
            raise ConformanceError(f"{where}: job {jid} holds {len(u)} units for a request of {p}")
        if len(np.unique(u)) != len(u):
            raise ConformanceError(f"{where}: job {jid} holds a unit twice ({txt})")
        if len(u) and (u.min() < 0 or u.max() >= total):
            raise ConformanceError(f"{where}: job {jid} holds units {txt} outside 0..{total - 1}")
        if e > s and not npre:
            rows += [(int(x), float(s), float(e), f"job {jid}") for x in np.unique(u // units_per_node)]
    bad = _overlaps(rows)
    if bad:
        what = "unit" if units_per_node == 1 else f"node (of {units_per_node} units)"
        raise ConformanceError(f"{where}: a {what} is used twice: {bad}")


def check_exclusive_units(target: Target, workload: str) -> None:
    out = run_target(target, workload)
    assert_exclusive_units(out.jobs, int(out.summary["machine_units"]),
                           f"scheduler {target.label!r} on workload {workload!r}", _exclusive_granularity(target))


def assert_tres_exclusive(df, real_memory_mb: dict | None = None, where: str = "run") -> None:
    """Raise `ConformanceError` unless, in a jobs table with the node-sharing columns of the Slurm-like
    policy (``gpus_alloc``: ``NODE:IDX;...``, ``mem_alloc_mb``: ``NODE:MB;...``,
    `schedulers.slurm_tres.alloc_columns`), no GPU of a node is held by two jobs at the same time and,
    when ``real_memory_mb`` ({node name: RealMemory MB}) is given, the memory held on a node never
    exceeds its RealMemory. Intervals are [start, end): a job ending at t frees its GPUs and memory
    for a job starting at t."""
    from hpctwin.schedulers.slurm_tres import parse_alloc  # noqa: PLC0415
    from hpctwin.twin.ranges import parse_ranges  # noqa: PLC0415
    cols = set(getattr(df, "columns", ()))
    gpu_rows: list = []
    mem_ev: dict[str, list] = {}
    for i, (jid, s, e) in enumerate(zip(df.job_id, df.start, df.end)):
        if not (np.isfinite(s) and np.isfinite(e)) or e <= s:
            continue
        who = f"job {jid}"
        if "gpus_alloc" in cols:
            for node, idx in parse_alloc(df.gpus_alloc.iloc[i]):
                gpu_rows += [((node, int(g)), float(s), float(e), who) for g in parse_ranges(idx)]
        if "mem_alloc_mb" in cols and real_memory_mb is not None:
            for node, mb in parse_alloc(df.mem_alloc_mb.iloc[i]):
                mem_ev.setdefault(node, []).extend([(float(s), 1, float(mb), who), (float(e), 0, -float(mb), who)])
    bad = _overlaps(gpu_rows)
    if bad:
        raise ConformanceError(f"{where}: a GPU is used by two jobs at once: GPU {bad}")
    for node, ev in mem_ev.items():
        cap = real_memory_mb.get(node)
        if cap is None:
            raise ConformanceError(f"{where}: memory held on node {node!r}, which has no RealMemory")
        held = 0.0
        for t, _kind, d, who in sorted(ev):            # ends (kind 0) before starts at the same time
            held += d
            if held > cap + 1e-6:
                raise ConformanceError(f"{where}: node {node} holds {held:g} MB at t={t:g} s ({who} starting), "
                                       f"RealMemory {cap:g} MB")


def check_tres_exclusive(target: Target, workload: str) -> None:
    """Under node sharing (``shares_nodes``): `assert_tres_exclusive` on the run's jobs table, with the
    RealMemory the policy reports (``scheduler_params.real_memory_mb``) when memory is consumable."""
    out = run_target(target, workload)
    sp = out.summary.get("scheduler_params", {})
    assert_tres_exclusive(out.jobs, sp.get("real_memory_mb"), f"scheduler {target.label!r} on workload {workload!r}")


def _exclusive_granularity(target: Target) -> int:
    """Units checked as one by `assert_exclusive_units`: a node of ``units_per_node`` for whole-node
    policies, one unit for a policy whose jobs share nodes (``shares_nodes``)."""
    tags = target.tags()
    return 1 if tags["shares_nodes"] else tags["units_per_node"]


def check_no_start_before_submit(target: Target, workload: str) -> None:
    df = run_target(target, workload).jobs
    early = df[df.start < df.submit]
    if len(early):
        r = early.iloc[0]
        _fail(target, workload, f"job {r.job_id} starts at {r.start:g} s before its submission at {r.submit:g} s")


def check_every_job_accounted(target: Target, workload: str) -> None:
    out = run_target(target, workload)
    df, s = out.jobs, out.summary
    skipped = sum(s.get("jobs_skipped", {}).values())
    if s["jobs_simulated"] + skipped != s["jobs_in_log"]:
        _fail(target, workload, f"{s['jobs_in_log']} jobs in the log but {s['jobs_simulated']} simulated and "
                                f"{skipped} reported skipped")
    never = df[~(np.isfinite(df.start) & np.isfinite(df.end))]
    if len(never):
        _fail(target, workload, f"job {never.job_id.iloc[0]} never ran ({len(never)} jobs), none reported unrunnable")
    bad = df[~df.state.isin(END_STATES)]
    if len(bad):
        _fail(target, workload, f"job {bad.job_id.iloc[0]} ends in state {bad.state.iloc[0]!r}")


#: states a job of a run without failures may end in (PREEMPTED: ended by its policy's preemption,
#: Slurm's PreemptMode=CANCEL)
END_STATES = ("COMPLETED", "TIMEOUT", "PREEMPTED")


def check_walltime(target: Target, workload: str) -> None:
    out = run_target(target, workload)
    df = out.jobs
    wl = _workloads()[workload].sorted()
    runtime = dict(zip(wl.job_id.tolist(), wl.runtime.tolist()))
    # a facility cap throttles running jobs (power.model): they may run slower than their runtime
    full_speed = not (target.run.get("power_cap")
                      or target.run.get("options", {}).get("power", {}).get("facility_cap_w") is not None)
    # a job requeued by preemption: ``elapsed`` spans all its runs (`check_preemption` checks each);
    # PREEMPTED: ended by a preemption; a job killed at its reservation's end (the Slurm-like policy's
    # ``resv_kill_at``, job_mgr.c job_time_limit) ends TIMEOUT then, before its own limit
    pre = df["preemptions"].to_numpy() if "preemptions" in df.columns else np.zeros(len(df))
    rkill = df["resv_kill_at"].to_numpy() if "resv_kill_at" in df.columns else np.full(len(df), np.nan)
    for jid, run, req, state, npre, rk, end in zip(df.job_id, df.elapsed, df.timelimit, df.state, pre, rkill,
                                                   df.end):
        rt = runtime[int(jid)]
        limit = req if (np.isfinite(req) and req > 0) else math.inf
        if npre or state == "PREEMPTED":
            continue
        if state == "TIMEOUT" and end == rk:
            if run > limit * (1 + 1e-12) + 1e-9 or not run <= rt + 1e-9:
                _fail(target, workload, f"job {jid} killed at its reservation's end ({rk:g} s) ran {run:g} s "
                                        f"(runtime {rt:g} s, limit {limit:g} s)")
            continue
        if rt > limit:
            if state != "TIMEOUT" or not math.isclose(run, limit, rel_tol=1e-12, abs_tol=1e-9):
                _fail(target, workload, f"job {jid} (runtime {rt:g} s, limit {limit:g} s) ran {run:g} s in "
                                        f"state {state!r}: it must be killed (TIMEOUT) at its limit")
        elif run > limit * (1 + 1e-12) + 1e-9:
            _fail(target, workload, f"job {jid} ran {run:g} s, beyond its limit {limit:g} s")
        elif full_speed and state != "TIMEOUT" and not math.isclose(run, rt, rel_tol=1e-12, abs_tol=1e-9):
            _fail(target, workload, f"job {jid} ran {run:g} s at full speed, its runtime is {rt:g} s")


def check_deterministic(target: Target, workload: str) -> None:
    a = run_target(target, workload).jobs
    b = run_target(target, workload, fresh=True).jobs
    for col in ("start", "end", "nodes", "state"):
        x, y = a[col].to_numpy(), b[col].to_numpy()
        same = (x == y) | (np.asarray(a[col].isna()) & np.asarray(b[col].isna()))
        if not same.all():
            i = int(np.flatnonzero(~same)[0])
            _fail(target, workload, f"not deterministic: job {a.job_id.iloc[i]} {col} = {x[i]!r} then {y[i]!r} "
                                    "with the same configuration")


def check_overrun(target: Target, workload: str) -> None:
    """Jobs that outlive their estimate (``kill_at_walltime = False``; also checkpoint overheads and
    throttled jobs) leave their units later than the scheduler believed: it must still never start
    a job on units still held (the engine refuses such a start with a SimulationError)."""
    t = Target(target.label + "[no kill]", target.scheduler, target.order, target.backfill, target.options,
               {**target.run, "kill_at_walltime": False})
    try:
        check_exclusive_units(t, workload)
        check_every_job_accounted(t, workload)
    except ConformanceError:
        raise
    except Exception as e:  # noqa: BLE001 - the engine's SimulationError, or the policy's own error
        _fail(target, workload, f"with jobs running past their estimate (kill_at_walltime = false): "
                                f"{type(e).__name__}: {e}")


# ====================================================================== declared guarantees
def _engine(target: Target, workload: str, models=(), record: bool = False):
    """Run ``target``'s scheduler object through `twin.simulation.Simulation` directly (node
    allocation, no other model unless given). Returns (result, prepared workload, scheduler, passes)
    where ``passes`` lists, when ``record``, (now, queue, free, running ends, running units, starts,
    new reservations) per scheduling pass."""
    from hpctwin.twin.run import job_table, prepare  # noqa: PLC0415
    from hpctwin.twin.simulation import Simulation  # noqa: PLC0415
    units = units_of(workload)
    prep = prepare(copy.deepcopy(_workloads()[workload]), units, "conformance")
    sched = target.make()
    passes: list = []
    if record:
        sched.first_reservation = {}
        inner = sched.schedule

        def schedule(now, queue, cluster):
            before = dict(sched.first_reservation)
            view = (float(now), np.array(queue), int(cluster.free), np.array(cluster.running_expected_end, dtype=float),
                    np.array(cluster.running_procs, dtype=np.int64))
            starts = list(inner(now, queue, cluster))
            new = {j: t for j, t in sched.first_reservation.items() if j not in before}
            passes.append(view + ([int(getattr(s, "job", s)) for s in starts], new))
            return starts
        sched.schedule = schedule
    sim = Simulation(job_table(prep), prep.workload.runtime, prep.kill_limit, sched, units, models=list(models))
    return sim.run(), prep, sched, passes


def _shadow(now: float, free: int, ends: np.ndarray, units: np.ndarray, need: int) -> float:
    """Earliest time >= now at which ``need`` units are free, from running jobs' expected ends."""
    if free >= need:
        return now
    order = np.argsort(np.maximum(ends, now), kind="stable")
    avail = free + np.cumsum(units[order])
    k = int(np.searchsorted(avail, need))
    return float(max(ends[order][k], now)) if k < len(order) else math.inf


def check_easy_head(target: Target, workload: str) -> None:
    res, prep, sched, passes = _engine(target, workload, record=True)
    procs, est, jid = prep.workload.procs, prep.estimate, prep.workload.job_id
    fcfs = getattr(sched, "order_name", None) == "fcfs"
    seen_any = False
    first_shadow: dict[int, tuple[float, float]] = {}     # FCFS head -> (time it became head, shadow)
    for now, queue, free, ends, units, starts, new in passes:
        s_free = free - int(sum(procs[s] for s in starts))
        s_ends = np.concatenate((ends, [now + est[s] for s in starts]))
        s_units = np.concatenate((units, [procs[s] for s in starts])).astype(np.int64)
        if fcfs:
            started = set(starts)
            waiting = [q for q in queue.tolist() if q not in started]
            if waiting and waiting[0] not in first_shadow:
                h = waiting[0]
                first_shadow[h] = (now, _shadow(now, s_free, s_ends, s_units, int(procs[h])))
        if not new:
            continue
        seen_any = True
        if len(new) > 1:
            _fail(target, workload, f"at t={now:g} s EASY reserved {len(new)} jobs in one pass (only the head)")
        (j, t), = new.items()
        if j in starts or j not in set(queue.tolist()):
            _fail(target, workload, f"at t={now:g} s job {jid[j]} got a reservation but is not a waiting job")
        if fcfs and waiting and waiting[0] != j:
            _fail(target, workload, f"at t={now:g} s the reserved job is {jid[j]}, the FCFS head is {jid[waiting[0]]}")
        want = _shadow(now, s_free, s_ends, s_units, int(procs[j]))
        if not math.isclose(t, want, rel_tol=0, abs_tol=1e-6):
            _fail(target, workload, f"at t={now:g} s head job {jid[j]} reserved at {t:g} s; its shadow time from "
                                    f"the running jobs' expected ends is {want:g} s")
        if res.start[j] > t + 1e-9:
            _fail(target, workload, f"head job {jid[j]} reserved at {t:g} s (at t={now:g} s) starts later, at "
                                    f"{res.start[j]:g} s")
    for h, (t_head, shadow) in first_shadow.items():
        if res.start[h] > shadow + 1e-9:
            _fail(target, workload, f"FCFS head job {jid[h]} (head from t={t_head:g} s, shadow time {shadow:g} s "
                                    f"from the running jobs' expected ends) starts later, at {res.start[h]:g} s")
    if not seen_any and workload == "mixed":
        _fail(target, workload, "declares easy_head but recorded no reservation in first_reservation")


def check_conservative(target: Target, workload: str) -> None:
    res, prep, sched, passes = _engine(target, workload, record=True)
    jid = prep.workload.job_id
    if not sched.first_reservation and workload == "mixed":
        _fail(target, workload, "declares conservative but recorded no reservation in first_reservation")
    for now, queue, free, ends, units, starts, new in passes:
        for j, t in new.items():
            if t < now - 1e-9:
                _fail(target, workload, f"at t={now:g} s job {jid[j]} was reserved in the past ({t:g} s)")
    for j, t in sched.first_reservation.items():
        if res.start[j] > t + 1e-9:
            _fail(target, workload, f"job {jid[j]} first reserved at {t:g} s starts later, at {res.start[j]:g} s")


def check_node_failures(target: Target, workload: str, seed: int = 0) -> None:
    from hpctwin.twin.failures import FailureConfig, FailureModel  # noqa: PLC0415
    regimes = ["requeue", "checkpoint_restart", "fast_recovery", "fail"]
    # a node failure takes down the units of one node of the policy (Slurm's cpus_per_node > 1)
    upn = target.tags()["units_per_node"]
    model = FailureModel(FailureConfig(node_mtbf_s=30000.0 * upn, repair_s=400.0, checkpoint_s=20.0,
                                       restart_s=30.0, interval=300.0, units_per_node=upn,
                                       regimes={"default": regimes[seed % 4]}))
    try:
        res, prep, _, _ = _engine(target, workload, models=[model])
    except Exception as e:  # noqa: BLE001 - any failure is a finding
        _fail(target, workload, f"under node failures (regime {regimes[seed % 4]}): {type(e).__name__}: {e}")
    jid, submit = prep.workload.job_id, prep.workload.submit
    if not model.node_failures:
        _fail(target, workload, "the failure model injected no failure (the check needs some)")
    if not np.isfinite(res.end).all():
        _fail(target, workload, f"job {jid[int(np.flatnonzero(~np.isfinite(res.end))[0])]} never ends under failures")
    rows = [(int(u), s0, e0, f"job {jid[j]} (interrupted run)") for j, s0, e0, txt in res.segments
            for u in _units_of(txt)]
    for j in range(len(jid)):
        if not res.failed[j]:
            rows += [(int(u), float(res.last_start[j]), float(res.end[j]), f"job {jid[j]}")
                     for u in _units_of(res.nodes[j])]
    rows += [(int(u), t0, t1, f"down node {node}") for node, t0, t1 in model.outages
             for u in range(node * upn, (node + 1) * upn)]
    bad = _overlaps([r for r in rows if r[2] > r[1]])
    if bad:
        _fail(target, workload, f"under node failures a unit is used twice or while down: {bad}")
    ok = ~res.failed
    resp = res.end - submit
    diff = np.abs(res.queued + res.held - resp)
    if (diff[ok] > 1e-6 * np.maximum(1.0, resp[ok])).any():
        j = int(np.flatnonzero(ok & (diff > 1e-6 * np.maximum(1.0, resp)))[0])
        _fail(target, workload, f"job {jid[j]}: queued {res.queued[j]:g} s + held {res.held[j]:g} s != response "
                                f"{resp[j]:g} s")


def check_failures_run(target: Target, workload: str, seed: int = 0) -> None:
    """Node failures through the run (``failures`` options, as ``--failures on``), for policies that
    need a run of their own (power, GPU allocation, LLM system): every job ends (completed, killed or
    failed), none starts before its submission, the last runs hold distinct units, and for every job
    that did not fail, time queued + time held = end - submit."""
    regimes = ["requeue", "checkpoint_restart", "fast_recovery", "fail"]
    gpu = target.run.get("allocation") == "gpu"
    nodes = units_of(workload) // (GPUS_PER_NODE if gpu else 1)
    fail = {"enabled": True, "node_mtbf_s": 30000.0 * nodes / UNITS, "repair_s": 400.0, "checkpoint_s": 20.0,
            "restart_s": 30.0, "interval": 300.0, "regimes": {"default": regimes[seed % 4]}}
    opts = dict(target.run.get("options", {}))
    opts["failures"] = fail
    t = Target(f"{target.label}[failures {regimes[seed % 4]}]", target.scheduler, target.order, target.backfill,
               target.options, {**target.run, "options": opts, "seed": seed})
    try:
        out = run_target(t, workload)
    except ConformanceError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure is a finding
        _fail(target, workload, f"under node failures (regime {regimes[seed % 4]}): {type(e).__name__}: {e}")
    df, s = out.jobs, out.summary
    if not s["failures"]["node_failures"]:
        _fail(target, workload, "the failure model injected no failure (the check needs some)")
    bad = df[~df.state.isin(["COMPLETED", "TIMEOUT", "NODE_FAIL"]) | ~np.isfinite(df.end)]
    if len(bad):
        _fail(target, workload, f"under node failures job {bad.job_id.iloc[0]} does not end ({bad.state.iloc[0]!r})")
    check_no_start_before_submit(t, workload)
    # jobs never interrupted held their units over [start, end); an interrupted job's earlier runs and
    # its last run's start are not in the jobs table
    assert_exclusive_units(df[df.failures == 0], int(s["machine_units"]),
                           f"scheduler {target.label!r} on workload {workload!r} under node failures "
                           "(jobs never interrupted)", _exclusive_granularity(target))
    ok = (df.state != "NODE_FAIL").to_numpy()
    resp = (df.end - df.submit).to_numpy()
    diff = np.abs(df.queued_s.to_numpy() + df.held_s.to_numpy() - resp)
    badj = np.flatnonzero(ok & (diff > 1e-6 * np.maximum(1.0, resp)))
    if len(badj):
        r = df.iloc[int(badj[0])]
        _fail(target, workload, f"under node failures job {r.job_id}: queued {r.queued_s:g} s + held {r.held_s:g} s "
                                f"!= response {r.end - r.submit:g} s")


# ====================================================================== preemption and reservations
def job_runs(res, jid: np.ndarray) -> list[tuple[int, float, float, str]]:
    """Every run (segment) of every job of an engine result (`twin.simulation.SimResult`): the
    interrupted ones (``res.segments``) and each job's last run [``last_start``, ``end``) unless its
    last run was interrupted (a job ended by a preemption or a failure). Rows (job index, start s, end
    s, units as range text), sorted by job then start."""
    rows = [(int(j), float(s0), float(e0), txt) for j, s0, e0, txt in res.segments]
    ended = {}
    for j, s0, e0, _ in rows:
        ended[j] = max(ended.get(j, -math.inf), e0)
    for j in range(len(jid)):
        if not np.isfinite(res.start[j]) or ended.get(j) == res.end[j]:
            continue
        rows.append((j, float(res.last_start[j]), float(res.end[j]), res.nodes[j] or ""))
    return sorted(rows, key=lambda r: (r[0], r[1]))


def assert_runs(res, jid: np.ndarray, submit: np.ndarray, limit: np.ndarray, runtime: np.ndarray,
                where: str = "run") -> None:
    """Raise `ConformanceError` unless, over the runs of `job_runs`: no unit is held by two runs at
    once (a requeued job's runs included: they never overlap); a job's runs follow one another, each
    no longer than its time limit (s); every job that ran has queued + held = end - submit and held =
    the sum of its runs; a job preempted (``res.preemptions``) has exactly that many interrupted runs;
    a requeued job that completed ran its whole runtime in its last run (Slurm restarts it from
    scratch); a job ended by a preemption (PREEMPTED) never ran again."""
    runs = job_runs(res, jid)
    bad = _overlaps([(int(u), s0, e0, f"job {jid[j]}") for j, s0, e0, txt in runs
                     for u in _units_of(txt) if e0 > s0])
    if bad:
        raise ConformanceError(f"{where}: a unit is used twice: {bad}")
    by: dict[int, list] = {}
    for j, s0, e0, _ in runs:
        by.setdefault(j, []).append((s0, e0))
    pre = res.preemptions if res.preemptions is not None else np.zeros(len(jid), dtype=np.int64)
    for j, rr in by.items():
        for (s0, e0), (s1, _) in zip(rr, rr[1:]):
            if s1 < e0:
                raise ConformanceError(f"{where}: job {jid[j]} runs again at {s1:g} s before its run "
                                       f"[{s0:g}, {e0:g}) s ended")
        for s0, e0 in rr:
            if e0 - s0 > limit[j] * (1 + 1e-12) + 1e-9:
                raise ConformanceError(f"{where}: job {jid[j]} ran [{s0:g}, {e0:g}) s, beyond its limit "
                                       f"{limit[j]:g} s")
        held = sum(e0 - s0 for s0, e0 in rr)
        resp = res.end[j] - submit[j]
        tol = 1e-6 * max(1.0, resp)
        if abs(res.held[j] - held) > tol or abs(res.queued[j] + res.held[j] - resp) > tol:
            raise ConformanceError(f"{where}: job {jid[j]}: queued {res.queued[j]:g} s + held "
                                   f"{res.held[j]:g} s (runs: {held:g} s) != response {resp:g} s")
        n_int = sum(1 for k, *_ in res.segments if k == j)
        if int(pre[j]) != n_int:
            raise ConformanceError(f"{where}: job {jid[j]} preempted {int(pre[j])} times but {n_int} of "
                                   "its runs were interrupted")
        if res.preempted is not None and res.preempted[j] and len(rr) != n_int:
            raise ConformanceError(f"{where}: job {jid[j]} ended by a preemption ran again")
        last = rr[-1][1] - rr[-1][0]
        if pre[j] and not res.killed[j] and not (res.preempted is not None and res.preempted[j]) \
                and not math.isclose(last, runtime[j], rel_tol=1e-12, abs_tol=1e-9):
            raise ConformanceError(f"{where}: job {jid[j]}, requeued by preemption, ran {last:g} s in its "
                                   f"last run; it restarts from scratch, runtime {runtime[j]:g} s")


def check_preemption(target: Target, workload: str) -> None:
    """A policy that preempts (tag ``preempts``): `assert_runs` on the engine path (no model, so every
    interruption is a preemption), and some preemption on ``mixed`` (the check needs some)."""
    res, prep, _, _ = _engine(target, workload)
    wl = prep.workload
    limit = np.where(np.isfinite(prep.kill_limit), prep.kill_limit, math.inf)
    assert_runs(res, wl.job_id, wl.submit, limit, wl.runtime,
                f"scheduler {target.label!r} on workload {workload!r}")
    if workload.startswith("mixed") and (res.preemptions is None or not res.preemptions.sum()):
        _fail(target, workload, "no job was preempted (the check needs some)")


def assert_reservations(df, resv: list[dict], node_index: dict[str, int], job_resv: dict[int, str],
                        horizon: float, units_per_node: int = 1, over_run: float = 0.0,
                        where: str = "run") -> None:
    """Raise `ConformanceError` unless, for every reservation of ``resv`` (``scheduler_params.reservations``
    of the Slurm-like policy: name, start, end, period, nodes (names or indices), flags) and each of its
    windows [start, end) up to ``horizon`` (s; recurring ones every ``period``): no job outside it (its
    reservation in ``job_resv``, {job id: name}) holds one of its nodes during the window (half-open: a
    job ending at its start may, Slurm's ``job_test_resv``); unless the reservation is FLEX, a job of it
    runs only on its nodes, starts inside a window [start, end] and ends by end + ``over_run`` + 30 s
    (job_mgr.c ``job_time_limit``, every PERIODIC_TIMEOUT). Jobs preempted (``preemptions``) are skipped."""
    from .slurm_resv import PERIODIC_TIMEOUT  # noqa: PLC0415 - Slurm runs only
    pre = df["preemptions"].to_numpy() if "preemptions" in df.columns else np.zeros(len(df))
    for r in resv:
        nodes = {node_index[x] if isinstance(x, str) else int(x) for x in r["nodes"]}
        period = r.get("period") or 0.0
        wins = []
        t0, t1 = float(r["start"]), float(r["end"])
        while t0 < horizon:
            wins.append((t0, t1))
            if not period:
                break
            t0, t1 = t0 + period, t1 + period
        flex = "FLEX" in r["flags"]
        for jid, s, e, txt, npre in zip(df.job_id, df.start, df.end, df.nodes, pre):
            if not np.isfinite(s) or npre:
                continue
            held = {int(u) // units_per_node for u in _units_of(txt)}
            mine = job_resv.get(int(jid), "") == r["name"]
            if mine and not flex:
                if not held <= nodes:
                    raise ConformanceError(f"{where}: job {jid} of reservation {r['name']} runs on nodes "
                                           f"{sorted(held - nodes)} outside it")
                w = [(a, b) for a, b in wins if a <= s <= b]
                if not w:
                    raise ConformanceError(f"{where}: job {jid} of reservation {r['name']} starts at {s:g} s "
                                           f"outside its windows {wins[:3]}")
                if e > w[0][1] + over_run + PERIODIC_TIMEOUT + 1e-9:
                    raise ConformanceError(f"{where}: job {jid} of reservation {r['name']} ends at {e:g} s, "
                                           f"after the window's end {w[0][1]:g} s + ResvOverRun + the "
                                           f"{PERIODIC_TIMEOUT:g} s of slurmctld's periodic check")
            elif not mine and held & nodes:
                for a, b in wins:
                    if s < b and e > a:
                        raise ConformanceError(
                            f"{where}: job {jid} (not in reservation {r['name']}) holds node(s) "
                            f"{sorted(held & nodes)} over [{s:g}, {e:g}) s, inside the window [{a:g}, {b:g}) s")


def check_reservations(target: Target, workload: str) -> None:
    """A policy with advance reservations (tag ``reservations``): `assert_reservations` on the run, the
    jobs' reservations read from the workload's ``reservation`` column (none with the option
    ``job_reservations=ignore``)."""
    out = run_target(target, workload)
    sp = out.summary.get("scheduler_params", {})
    resv = sp.get("reservations") or []
    if not resv:
        _fail(target, workload, "declares reservations but reports none (scheduler_params.reservations)")
    wl = _workloads()[workload]
    col = (wl.columns or {}).get("reservation")
    job_resv = {}
    if col is not None and str(target.options.get("job_reservations", "use")).lower() != "ignore":
        job_resv = {int(j): str(x) for j, x in zip(wl.job_id, col) if str(x)}
    names = list(getattr(target.make().cfg, "node_names", []) or [])
    df = out.jobs
    horizon = float(np.nanmax(df.end)) if len(df) else 0.0
    assert_reservations(df, resv, {nm: i for i, nm in enumerate(names)}, job_resv, horizon,
                        _exclusive_granularity(target), float(sp.get("resv_over_run_s") or 0.0),
                        f"scheduler {target.label!r} on workload {workload!r}")


# ====================================================================== withdrawn jobs
class Canceller:
    """A `twin.contract.RunModel` that withdraws waiting jobs (`twin.control.EngineControl.cancel`),
    as a serving autoscaler withdraws a node request. With ``plan`` (``[(time s, job index)]``) it
    cancels those jobs at those times; otherwise every ``every_s`` seconds from the first submission
    + ``every_s / 2`` it cancels the first waiting job (by index: the FCFS head, the one EASY
    protects) at odd ticks, the last at even ticks, both at every third tick; at most ``limit``."""

    name = "cancel-check"

    def __init__(self, every_s: float = 300.0, limit: int = 6, plan: list | None = None) -> None:
        self.every_s, self.limit = float(every_s), int(limit)
        self.plan = sorted(plan) if plan is not None else None
        self.cancelled: list[tuple[int, float]] = []     # (job index, time s)
        self.ticks = 0

    def bind(self, ctx) -> None:
        self.n = len(ctx.jobs)
        self.next_t = (float(ctx.jobs.submit[0]) if self.n else 0.0) + self.every_s / 2

    def next_event(self, now: float) -> float | None:
        if self.plan is not None:
            return self.plan[0][0] if self.plan else None
        return self.next_t if len(self.cancelled) < self.limit else None

    def on_event(self, now: float, control) -> None:
        if self.plan is not None:
            while self.plan and self.plan[0][0] <= now:
                _, j = self.plan.pop(0)
                control.cancel(j)
                self.cancelled.append((j, now))
            return None
        self.ticks += 1
        self.next_t = now + self.every_s
        waiting = [j for j in range(self.n) if control.state(j) == "waiting"]
        if not waiting:
            return None
        pick = [waiting[0], waiting[-1]] if self.ticks % 3 == 0 else [waiting[0] if self.ticks % 2 else waiting[-1]]
        for j in dict.fromkeys(pick):
            if len(self.cancelled) < self.limit:
                control.cancel(j)
                self.cancelled.append((j, now))
        return None

    # the rest of the RunModel protocol: nothing to add to the run's results
    def on_start(self, now, job, nodes):
        return None

    def on_finish(self, now, job):
        return None

    def finalize(self, end: float) -> None:
        pass

    def job_columns(self) -> dict:
        return {}

    def timeseries(self, grid, dt) -> dict:
        return {}

    def summary(self) -> dict:
        return {}


def cancel_probe(units: int = UNITS) -> Workload:
    """Three jobs: A (3/4 of the machine, requested 100 s, runs 50 s; an LLM training job for the
    LLM-aware policy) at 0, B (the whole machine, 1,000 s) at 1 s, C (half the machine, requested
    100 s, runs 50 s) at 2 s. Conservative reserves B at [100, 1100) s and C after it. With B
    withdrawn at 10 s, C is the only waiting job once A ends early, at 50 s: it must start then (a
    reservation kept for B would hold C until 1,100 s, with no event in between to notice)."""
    a, half = max(1, 3 * units // 4), max(1, units // 2)
    procs = np.array([a, units, half])
    return Workload.from_arrays("conformance-cancel-probe", submit=np.array([0.0, 1.0, 2.0]),
                                runtime=np.array([50.0, 1000.0, 50.0]), procs=procs,
                                requested_time=np.array([100.0, 1000.0, 100.0]), user=np.zeros(3, dtype=int),
                                group=np.zeros(3, dtype=int),
                                columns={"gpus": procs.astype(float),
                                         "job_class": np.array(["llm_pretrain", "hpc_batch", "hpc_batch"],
                                                               dtype=object)},
                                machine_size=units)


def run_with_canceller(target: Target, workload: str, canceller: "Canceller",
                       wl: Workload | None = None) -> Outcome:
    """``target`` on ``workload`` (or the Workload ``wl``, labelled ``workload``) through `twin.run.simulate`
    with ``canceller`` added to the run's models (``extra_models``: after those the configuration
    builds, so policies that need a run of their own, power, GPU allocation, a system, get it)."""
    from hpctwin.twin.run import RunConfig, simulate  # noqa: PLC0415
    label, scheduler, order, backfill, options, run = json.loads(target.key())
    cfg = RunConfig(
        workload=f"conformance-{workload}", scheduler=scheduler, order=order, backfill=backfill,
        nodes=units_of(workload) // GPUS_PER_NODE if run.get("allocation") == "gpu" else units_of(workload),
        options={**run.pop("options", {}), **({"scheduler": options} if options else {})}, **run)
    res = simulate(cfg, copy.deepcopy(wl if wl is not None else _workloads()[workload]), extra_models=[canceller])
    return Outcome(res.jobs, res.summary)


def check_cancel(target: Target, workload: str) -> None:
    """Waiting jobs withdrawn at run time (`Canceller`) never start and are CANCELLED with no start
    or end; every other job runs to an end; units are never held twice; nothing starts before its
    submission. A policy that kept a withdrawn job in its own queue state and started it makes the
    engine raise ("not waiting"), reported here."""
    cc = Canceller()
    try:
        out = run_with_canceller(target, workload, cc)
    except Exception as e:  # noqa: BLE001 - any failure is a finding
        _fail(target, workload, f"with waiting jobs cancelled ({cc.cancelled}): {type(e).__name__}: {e}")
    df, s = out.jobs, out.summary
    if not cc.cancelled and workload == "mixed":
        _fail(target, workload, "the cancel check withdrew no job (it needs a queue)")
    wl = _workloads()[workload].sorted()
    gone = {int(wl.job_id[j]) for j, _ in cc.cancelled}
    is_gone = df.job_id.isin(gone).to_numpy()
    # (a job preempted and requeued, then cancelled while waiting again, keeps its first start and the
    # end of its last run: `twin.control.EngineControl.cancel`)
    ran = (df["preemptions"] > 0) if "preemptions" in df.columns else False
    bad = df[is_gone & ~((df.state == "CANCELLED") & ((df.start.isna() & df.end.isna()) | ran))]
    if len(bad):
        r = bad.iloc[0]
        _fail(target, workload, f"cancelled job {r.job_id} has state {r.state!r}, start {r.start}, end {r.end}")
    rest = df[~is_gone]
    bad = rest[~rest.state.isin(END_STATES) | ~(np.isfinite(rest.start) & np.isfinite(rest.end))]
    if len(bad):
        _fail(target, workload, f"job {bad.job_id.iloc[0]} (not cancelled) ends in state {bad.state.iloc[0]!r}")
    skipped = sum(s.get("jobs_skipped", {}).values())
    if s["jobs_simulated"] + skipped != s["jobs_in_log"]:
        _fail(target, workload, f"{s['jobs_in_log']} jobs in the log, {s['jobs_simulated']} simulated, "
                                f"{skipped} skipped")
    early = df[df.start < df.submit]
    if len(early):
        _fail(target, workload, f"job {early.job_id.iloc[0]} starts before its submission")
    assert_exclusive_units(df, int(s["machine_units"]), f"scheduler {target.label!r} on workload {workload!r} "
                           "with cancelled jobs", _exclusive_granularity(target))


def check_cancel_frees(target: Target, workload: str = "cancel-probe") -> None:
    """`cancel_probe`: B withdrawn at 10 s leaves no trace in the policy's plan: C starts at 50 s,
    when A ends (a reservation kept for B would hold C until B's planned end, 1,100 s)."""
    cc = Canceller(plan=[(10.0, 1)])
    try:
        out = run_with_canceller(target, workload, cc, cancel_probe())
    except Exception as e:  # noqa: BLE001 - any failure is a finding
        _fail(target, workload, f"B withdrawn at 10 s: {type(e).__name__}: {e}")
    df = out.jobs.set_index("job_id")
    ids = cancel_probe().job_id
    b, c = df.loc[int(ids[1])], df.loc[int(ids[2])]
    if b.state != "CANCELLED" or b.start == b.start:
        _fail(target, workload, f"B withdrawn at 10 s has state {b.state!r}, start {b.start}")
    if c.start != 50.0:
        _fail(target, workload, f"C starts at {c.start:g} s; with B withdrawn at 10 s it must start when A ends, "
                                "at 50 s (the policy kept B's share of its plan)")


# ====================================================================== the suite
GENERIC_CHECKS: tuple[tuple[str, Callable, tuple[str, ...]], ...] = (
    ("exclusive_units", check_exclusive_units, ("mixed", "burst", "exact")),
    ("no_start_before_submit", check_no_start_before_submit, ("mixed", "burst", "exact")),
    ("every_job_accounted", check_every_job_accounted, ("mixed", "burst", "exact")),
    ("walltime", check_walltime, ("mixed", "burst")),
    ("deterministic", check_deterministic, ("mixed",)),
    ("overrun", check_overrun, ("mixed", "burst")),
    ("cancel", check_cancel, ("mixed", "burst")),
    ("cancel_frees", check_cancel_frees, ("cancel-probe",)),
)


def check_scheduler(target: Target) -> Iterator[tuple[str, Callable[[], None]]]:
    """Yield ``(check name, check)`` for ``target``: the generic checks, then the checks of the
    guarantees and tags its scheduler object declares (see the module docstring). A scheduler that
    cannot be built gets one failing check, ``constructs``."""
    try:
        tags = target.tags()
    except Exception as e:  # noqa: BLE001 - the "constructs" check reports it
        msg = f"scheduler {target.label!r} cannot be built: {type(e).__name__}: {e}"

        def constructs() -> None:
            raise ConformanceError(msg)
        yield "constructs", constructs
        return
    for name, fn, wls in GENERIC_CHECKS:
        yield name, functools.partial(_each, fn, target, wls)
    engine_ok = not target.run            # the direct engine path has node allocation and no model
    if "easy_head" in tags["guarantees"]:
        yield "easy_head", functools.partial(_each, check_easy_head, target, ("mixed", "exact", "burst"))
    if "conservative" in tags["guarantees"]:
        yield "conservative", functools.partial(_each, check_conservative, target, ("mixed", "exact", "burst"))
    if tags["shares_nodes"]:               # GPUs and memory per node (the Slurm-like cons_tres columns)
        yield "tres_exclusive", functools.partial(_each, check_tres_exclusive, target, ("mixed", "burst"))
    if tags["preempts"] and engine_ok:     # every run of a preempted job (the engine's segments)
        yield "preemption", functools.partial(_each, check_preemption, target, ("mixed", "burst", "exact"))
    if tags["reservations"]:               # nobody else on a reservation's nodes inside its window
        yield "reservations", functools.partial(_each, check_reservations, target, ("mixed", "burst", "exact"))
    if tags["supports_failures"]:
        yield "node_failures", functools.partial(_failures if engine_ok else _failures_run, target)


def _each(fn: Callable, target: Target, wls: tuple[str, ...]) -> None:
    for w in wls:
        fn(target, target.wl(w))


def _failures(target: Target) -> None:
    for seed in range(4):
        check_node_failures(target, target.wl("mixed"), seed)


def _failures_run(target: Target) -> None:
    for seed in range(4):
        check_failures_run(target, target.wl("mixed"), seed)


def run_checks(target: Target) -> dict[str, str]:
    """Run every check of ``target``; returns {check: "ok" or the error text}."""
    out = {}
    for name, check in check_scheduler(target):
        try:
            check()
            out[name] = "ok"
        except ConformanceError as e:
            out[name] = str(e)
    return out
