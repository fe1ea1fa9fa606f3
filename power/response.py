"""User response to prices: `UserResponse` (how users change the workload they submit), its presets and `calibrate`.

How it fits (our choice): pricing (`power.accounting`) never changes a schedule; what does is how users
react to prices. `UserResponse.apply` transforms the workload *before* the run (shifted submissions,
older or capped hardware, accepted power caps, fewer nodes), and the run then shows what the change
does to energy, waits and bounded slowdown. `predicted_job_energy_j` gives the jobs' energy the power
model will integrate without running, which `calibrate` uses to fit a response to a published anchor.
`power.accounting` re-exports every public name of this module, so ``from power.accounting import
UserResponse`` keeps working.

Units: time s, power W (per node, or per device for caps), energy J. Probabilities are fractions.

Published anchors, what they measured, and how they are represented here
-------------------------------------------------------------------------
(Looked up with the project's search tool; sources as cited. The papers' full texts were not
retrievable: what is not in the cited abstract, blog post, news item or artifact is marked as an
assumption.)

* **Kamatar et al. 2025**: A. Kamatar, M. Gonthier, V. Hayot-Sasson, A. Bauer, M. Copik, R. Castro
  Fernandez, T. Hoefler, K. Chard, I. Foster, "Core Hours and Carbon Credits: Incentivizing
  Sustainability in HPC", SC'25, doi:10.1145/3712285.3759858, arXiv:2501.09557 (v2 abstract); the
  first author's post on the Chameleon blog (2026-01-26); artifact github.com/AK2000/core-hours-artifact.
  They surveyed 316 HPC users (73 % knew their jobs' node-hours, 27 % their energy; energy efficiency
  ranked last among reasons to pick a machine), proposed Energy-Based Accounting (EBA: charge the
  energy a job uses) and Carbon-Based Accounting, measured the same benchmarks on different hardware
  (Cholesky on four CPU systems: Cascade Lake fastest but more than twice the energy of AMD Zen3;
  P100, V100, A100 GPUs: the A100 6 % faster than the V100 but 60 % more energy), simulated 71,190
  jobs with measured energy (energy-optimising users did 28 % more work with 40 % less energy) and ran
  the user study behind the anchor: a web game of HPC resource selection, 90 participants, three
  conditions (time-based cost; time-based cost with energy shown; EBA). Showing energy alone changed
  nothing; under EBA participants used 40 % less energy on average: "They didn't avoid
  energy-intensive jobs, but consistently selected more efficient machines to run them." So the
  40 % comes from *which resource* each task runs on: not from running fewer jobs, not from shifting
  them in time, not from fewer nodes. Representation: `UserResponse`'s **efficient choice**: a job's
  user (probability ``efficient_users``) picks the least-energy option of a menu within
  ``max_slowdown``: the older GPUs of the artifact's measurements (KAMATAR_GPU_RUNS: V100 0.627 x the
  energy at 1.063 x the runtime, P100 0.423 x at 1.652 x, against A100), emulated on the twin's nodes
  at their speed and power (see "Emulated hardware" below), and the machine's own GPU power caps.
  Preset ``kamatar2025`` has ``efficient_users`` fitted by `calibrate` to 40 %
  (KAMATAR2025_EFFICIENT_USERS). The 40 % is the participants' energy, so it is compared with the
  *jobs'* energy (``energy_j``) against node-hour charging without response; the facility's energy
  (idle nodes, losses, cooling) falls by less. Assumptions: the game's own menu and costs are not
  known to us (we use the artifact's measured GPU pairs and a 2x slowdown limit); each chosen older
  GPU is its own machine (`UserResponse.apply_partitioned`, "Partitions" below). On a homogeneous Frontier-class
  machine the same incentive, with only its GPU caps to choose from, gives at most 16.8 % less jobs'
  energy on KTH-SP2 even with every user responding (preset ``kamatar2025-homogeneous``): the anchor
  needs hardware heterogeneity.
* **Yang et al. 2013**: X. Yang, Z. Zhou, S. Wallace, Z. Lan, W. Tang, S. Coghlan, M. E. Papka,
  "Integrating Dynamic Pricing of Electricity into Energy Aware Scheduling for HPC Systems", SC'13
  (abstract on the SC13 programme page; HPCwire research highlight 2013-11-16; Argonne's summary of the
  predecessor, Zhou et al., JSSPP 2013). A *scheduler*, not users: it keeps a window of jobs at the
  front of the queue and, knowing each job's power profile (they differ "as high as over two times"),
  dispatches high-power jobs in the off-peak period and low-power jobs on-peak (Greedy and 0-1
  knapsack policies; the knapsack maximises nodes allocated under a power budget); trace-based
  simulations of an IBM Blue Gene/P and a cluster, and a case study on Argonne's 48-rack Blue
  Gene/Q; the electricity bill fell by up to 23 % (the predecessor: up to 25 %, with three on-peak to
  off-peak price ratios and three job-power ranges over six months of a Blue Gene/P workload) with
  negligible impact on utilisation. Not retrieved: the price ratios, on-peak hours, window size,
  power ranges and whether idle power is billed. Representation:
  `schedulers.price_aware.PriceAwareScheduler` and its setting ``schedulers.price_aware.YANG2013``
  (assumed: 2x job power spread, on-peak 08:00-20:00 at 3x, window of 10 jobs);
  ``UserResponse.preset("yang2013")`` raises and points there. `power.accounting.facility_cost` bills
  the facility's power; the per-job `power.accounting.EnergyCharge` (``pue_share=False``) bills the
  jobs' power.

Emulated hardware
-----------------
An alternative ``(energy_ratio e, runtime_ratio t)`` is other hardware relative to the twin's own
(e.g. a V100 against an A100). A job that picks it runs on nodes of the twin's power model (its own
partition's, see "Partitions"; with plain `apply` the twin's own nodes and queue), but **at the
chosen hardware's speed and power**:

* its runtime becomes t x T (exact, in float seconds) and its requested time ceil(t x R), so the
  schedule, waits and bounded slowdown see the slower hardware and the job is not killed for it;
* its node power becomes P' = P0 x e / t (P0: its node power on the twin), so its energy is
  P' x t x T = e x P0 x T, the hardware's energy ratio. P' is reached by scaling every device's
  utilisation by one factor k = (P' - P_idle) / (P0 - P_idle) (the node power is affine in the
  utilisations, `power.config.PowerConfig.node_power_w`).
* **Below idle**: a node cannot draw less than its idle power P_idle. When P' < P_idle (a slow,
  frugal part on a node whose idle power is high: on Frontier P_idle = 626 W, so the P100's
  e / t = 0.256 falls below idle for every job drawing under 2,447 W) the job runs at P_idle
  (utilisation 0) and its energy is t x P_idle x T > e x P0 x T: the twin's node, not the other
  hardware, sets the floor. The user compares options at these *emulated* energies, so a floored
  option is chosen only when it still saves the most. ``info["emulation"]["below_idle"]`` counts the
  jobs that picked a floored option.
* **Above the maximum**: an alternative with e / t > 1 (faster, hungrier hardware) needs k > 1; k is
  limited so no utilisation exceeds 1, the energy is what that power gives, and
  ``info["emulation"]["above_max"]`` counts the jobs that picked such a clipped option.

What this leaves out: the other hardware's own node power (idle included), and any difference in
node count a port would need.

Partitions
----------
A user who picks other hardware sends the job to that machine's queue, not the twin's.
`UserResponse.apply_partitioned` (`split_by_hardware`) returns the workload split by machine:
``HOME_PARTITION`` (jobs that kept the twin's hardware, including those that chose a cap level) and
one `Workload` per alternative that jobs chose, each to be run as its own twin run (its own nodes
and queue; `experiments.incentives_whatif.combine_partitions` sums the runs). Each partition runs
the emulation above on nodes with the twin's power model, so its idle nodes draw the twin's idle
power (an assumption: no idle power of the older nodes was measured). A job larger than a
partition (``partition_nodes``) does not choose it. The jobs' energy does not depend on where or
when a job runs, so `calibrate` (``partition_nodes`` the same) fits the same ``efficient_users``
as the single-machine emulation did.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hpctwin.power.accounting import (
    CapRebate,
    EnergyCharge,
    FlatPrice,
    PricingError,
    Rule,
    Tariff,
)
from hpctwin.twin.workload import Workload

if TYPE_CHECKING:
    from hpctwin.power.config import PowerConfig

#: Kamatar et al. (SC'25) artifact, github.com/AK2000/core-hours-artifact, file gpu_experiments/results.csv
#: (commit f7b32304): one Cholesky benchmark (N = 2880, 50 tiles, 10 iterations, 1 GPU) measured on three
#: GPU generations: runtime (s) and mean BMC power (W).
KAMATAR_GPU_RUNS = {"A100": (1405.0, 1494.6666666666667), "V100": (1494.0, 881.3959731543624),
                    "P100": (2321.485266, 382.60645161290324)}


def _alternative(old: str, new: str = "A100") -> tuple[float, float]:
    """(energy ratio, runtime ratio) of running on GPU ``old`` instead of ``new`` (KAMATAR_GPU_RUNS)."""
    (t_o, p_o), (t_n, p_n) = KAMATAR_GPU_RUNS[old], KAMATAR_GPU_RUNS[new]
    return (t_o * p_o) / (t_n * p_n), t_o / t_n


#: Older, more efficient hardware relative to the newest (fastest) GPU, from KAMATAR_GPU_RUNS:
#: V100 0.627 x the energy at 1.063 x the runtime; P100 0.423 x the energy at 1.652 x the runtime. (The
#: Chameleon blog of the paper: "the A100 ran 6% faster than the V100 but used 60% more energy".)
KAMATAR_GPU_ALTERNATIVES = (_alternative("V100"), _alternative("P100"))
#: Operating points a responsive user may pick on the machine itself: device power caps as fractions of
#: each device's maximum power (an assumption: a facility offering four DVFS/cap levels).
DEFAULT_CHOICE_CAP_FRACTIONS = (0.85, 0.7, 0.55, 0.4)
#: Largest runtime multiplier a responsive user accepts for a cheaper configuration (an assumption; it
#: admits the oldest GPU of KAMATAR_GPU_RUNS, 1.65 x slower than the newest).
DEFAULT_MAX_SLOWDOWN = 2.0
#: ``efficient_users`` of the ``kamatar2025`` preset: fitted by `calibrate` (bisection on the predicted
#: jobs' energy, target 0.40 = Kamatar et al.'s user-study reduction) on KTH-SP2 (28,476 jobs) on 100
#: Frontier nodes, seed 0, with the preset's menu and the emulated hardware at its own speed (runtime
#: x runtime_ratio): 0.86359 -> 40.00 %. Unchanged with the older hardware on its own partitions of 100
#: nodes (`UserResponse.apply_partitioned`; the jobs' energy does not depend on where a job runs): the
#: partitioned what-if measures 40.00 % on KTH-SP2. At the rounded value seeds 0, 1 and 2 give 40.0 %, 41.2 % and
#: 40.8 %. (Before the emulated hardware ran at its own speed, the fit was 0.7112; at that value the
#: stretched emulation gives 33.3 %.) ``python -m hpctwin.experiments.incentives_whatif --calibrate`` refits it.
KAMATAR2025_EFFICIENT_USERS = 0.8636
PROFILE_COLUMNS = ("cpu_util", "gpu_util", "compute_bound")
#: Label of the twin's own machine in `split_by_hardware` / `UserResponse.apply_partitioned`.
HOME_PARTITION = "home"


def load_power_config(system: Any) -> PowerConfig:
    """The `power.config.PowerConfig` of a system (a name, a path or a `twin.system.SystemSpec`)."""
    from hpctwin.power.config import parse_power  # noqa: PLC0415
    from hpctwin.twin.system import SystemSpec, load_system  # noqa: PLC0415
    spec = system if isinstance(system, SystemSpec) else load_system(str(system))
    if not spec.power:
        raise PricingError(f"user response: system {spec.path or spec.name} has no [power] table; "
                           "the efficient-choice and cap responses need the machine's power model")
    return parse_power(dict(spec.power), nodes=spec.nodes, cpus_per_node=spec.cpus_per_node,
                       gpus_per_node=spec.gpus_per_node, path=spec.path or "")


def materialize_profiles(workload: Workload, seed: int) -> Workload:
    """A copy of ``workload`` whose ``cpu_util``, ``gpu_util`` and ``compute_bound`` columns are filled.

    Missing values get the power model's default draws (`power.profiles.job_profiles`: Beta(4, 2),
    Beta(3, 2), Beta(2, 2); SWF ``avg_cpu`` when known), from stream ``seeded_rng(seed,
    "user-response.profile")``. Use it on a log *before* comparing runs with and without a response,
    so both runs give each job the same profile (the power model otherwise draws per run, by the
    index of the job among the jobs that run).
    """
    from hpctwin.power.profiles import job_profiles  # noqa: PLC0415
    from hpctwin.twin.model_api import seeded_rng  # noqa: PLC0415
    wl = workload.take(np.arange(len(workload)))
    cpu, gpu, beta = job_profiles(wl.columns, len(wl), seeded_rng(seed, "user-response.profile"),
                                  np.asarray(wl.runtime, dtype=float))
    wl.columns.update({"cpu_util": cpu, "gpu_util": gpu, "compute_bound": beta})
    return wl


def _ensure_profiles(wl: Workload, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fill ``wl``'s profile columns in place when any is missing (`materialize_profiles`); return copies."""
    if any(c not in wl.columns for c in PROFILE_COLUMNS):
        prof = materialize_profiles(wl, seed)
        for c in PROFILE_COLUMNS:
            wl.columns[c] = prof.columns[c]
    return tuple(np.array(wl.columns[c], dtype=float) for c in PROFILE_COLUMNS)


def _caps(wl: Workload, name: str) -> np.ndarray:
    c = wl.columns.get(name)
    return np.full(len(wl), np.inf) if c is None else np.where(np.isnan(np.asarray(c, float)), np.inf,
                                                                  np.asarray(c, float))


def _cap_stretch(cfg, cpu, gpu, beta, cpu_cap, gpu_cap) -> np.ndarray:
    """Runtime multiplier of jobs under per-device caps (W): Hsu-Feng beta model at the slower device's
    clock (`power.profiles.device_ratio`, vectorised)."""
    from hpctwin.power.profiles import frequency_ratio, stretch  # noqa: PLC0415
    a = cfg.cap_power_exponent
    ratio = np.ones(len(cpu))
    for util, cap, idle, mx, count in ((gpu, gpu_cap, cfg.gpu_idle_w, cfg.gpu_max_w, cfg.gpus_per_node),
                                       (cpu, cpu_cap, cfg.cpu_idle_w, cfg.cpu_max_w, cfg.cpus_per_node)):
        if count <= 0:
            continue
        cap = np.broadcast_to(np.asarray(cap, dtype=float), ratio.shape)
        on = np.isfinite(cap) & (util > 0)
        dyn = util * (mx - idle)
        capped = np.minimum(dyn, np.maximum(np.where(on, cap, 0.0) - idle, 0.0))
        ratio = np.where(on, np.minimum(ratio, frequency_ratio(dyn, capped, a)), ratio)
    return stretch(ratio, beta)


def emulation_scale(cfg: PowerConfig, cpu: np.ndarray, gpu: np.ndarray, energy_ratio: float,
                    runtime_ratio: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How a job runs on the twin's nodes when emulating other hardware (see "Emulated hardware").

    Returns ``(k, below_idle, above_max)`` per job: ``k`` the factor on both utilisations that brings
    the node power to P0 x energy_ratio / runtime_ratio, clipped to [0, 1 / max(cpu, gpu)];
    ``below_idle`` where that power is under the node's idle power (k = 0: the job runs at idle);
    ``above_max`` where it is out of reach above (k at its upper limit). A job at zero utilisation
    cannot be scaled (k = 1); it is flagged when the target differs from its (idle) power.
    """
    cpu = np.asarray(cpu, dtype=float)
    gpu = np.asarray(gpu, dtype=float)
    idle = cfg.node_idle_w
    p0 = np.asarray(cfg.node_power_w(cpu, gpu), dtype=float)
    dyn0 = np.maximum(p0 - idle, 0.0)
    target = p0 * (float(energy_ratio) / float(runtime_ratio))
    umax = np.maximum(cpu, gpu)
    kmax = np.where(umax > 0, 1.0 / np.where(umax > 0, umax, 1.0), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        k_raw = np.where(dyn0 > 0, (target - idle) / np.where(dyn0 > 0, dyn0, 1.0), 1.0)
    tol = 1e-9 * p0
    below = target < idle - tol
    above = target > idle + kmax * dyn0 + tol
    k = np.where(dyn0 > 0, np.clip(k_raw, 0.0, kmax), 1.0)
    return k, below, above


def predicted_job_energy_j(workload: Workload, system: Any, nodes: int | None = None) -> np.ndarray:
    """Node-component energy (J) of each job as the power model will integrate it, without running.

    energy = units x P_node(cpu_util, gpu_util, caps) x min(runtime x stretch, requested_time), with
    the stretch of `power.profiles` (caps) and the walltime kill (when requested_time > 0). Exact for
    runs without a facility power cap (whose throttling depends on the schedule) and with one unit a
    node. Jobs the run would skip (runtime <= 0, size < 1 or > ``nodes``, default the system's size)
    count 0. Needs the profile columns (`materialize_profiles`).
    """
    missing = [c for c in PROFILE_COLUMNS if c not in workload.columns]
    if missing:
        raise PricingError(f"predicted_job_energy_j: workload {workload.name!r} has no {', '.join(missing)} "
                           "column(s); call materialize_profiles(workload, seed) first")
    cfg = load_power_config(system)
    nodes = int(nodes or cfg.nodes)
    cpu, gpu, beta = (np.asarray(workload.columns[c], dtype=float) for c in PROFILE_COLUMNS)
    ccap, gcap = _caps(workload, "cpu_cap_w"), _caps(workload, "gpu_cap_w")
    p = cfg.node_power_w(cpu, gpu, ccap, gcap)
    run = np.asarray(workload.runtime, dtype=float) * _cap_stretch(cfg, cpu, gpu, beta, ccap, gcap)
    req = np.asarray(workload.requested_time, dtype=float)
    run = np.where(np.isfinite(req) & (req > 0), np.minimum(run, req), run)
    procs = np.asarray(workload.procs, dtype=float)
    ok = (np.asarray(workload.runtime, dtype=float) > 0) & (procs >= 1) & (procs <= nodes) & (workload.submit >= 0)
    return np.where(ok, procs * p * run, 0.0)


def _stretch_request(req: np.ndarray, factor: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``ceil(req x factor)`` where ``mask`` and the request is finite and > 0; ``req`` elsewhere."""
    ok = mask & np.isfinite(req) & (req > 0) & np.isfinite(factor)
    out = req.copy()
    out[ok] = np.ceil(req[ok] * factor[ok])
    return out


@dataclass
class UserResponse:
    """An optional behavioural model of users reacting to prices (applied to the workload before a run).

    For the shift, cap and fewer-nodes responses each *user* draws once whether they respond, so
    behaviour is consistent across their jobs; the efficient choice is drawn per *job* (the study
    behind it measured choices task by task, and per-job draws keep the calibrated reduction from
    hinging on a few heavy users). All probabilities are clipped to [0, 1]; every draw comes from
    ``seeded_rng(seed, "user-response")`` (per user: shift, cap, shrink; per job: shift, then
    efficient choice), so adding a response never changes the draws of another.

    * **Shift** (time-varying energy prices only): a job of a responsive user (probability
      ``shift_users``) whose submit time is not at the cheapest price within ``tolerance_h`` hours
      is delayed to the start of that cheapest period with probability ``shift_elasticity`` x the
      relative saving (p_now - p_min) / p_now.
    * **Efficient choice** (energy-based charging; the mechanism of Kamatar et al. 2025, see the module
      docstring): with probability ``efficient_users`` (the elasticity that `calibrate` fits) a
      job's user runs it in the configuration that minimises its energy (hence its
      charge) among a menu, subject to a runtime at most ``max_slowdown`` x the original:
      ``alternatives`` = ``(energy_ratio, runtime_ratio)`` pairs for other, more efficient hardware
      (default in the presets: Kamatar et al.'s measured V100 and P100 against A100), and
      ``choice_cap_fractions`` = power caps at these fractions of the device's maximum power on every
      GPU (on every CPU of a machine without GPUs): the machine's own operating points.
      An alternative is *emulated* on the twin's nodes at the chosen hardware's speed and power (module
      docstring, "Emulated hardware"): runtime x runtime_ratio, requested time ceil(x runtime_ratio),
      node power P0 x energy_ratio / runtime_ratio, floored at the node's idle power (such jobs are
      counted in ``info["emulation"]["below_idle"]``). A cap option slows the job (the power model's
      Hsu-Feng stretch) and its requested time grows by the same factor (so it is not killed).
      Option energies use the machine's power physics (`power.config.PowerConfig.node_power_w`), so
      they equal what the power model will integrate. Jobs that already carry a cap are left alone.
      Needs ``system`` in `apply` and the profile columns (drawn by `materialize_profiles` when missing).
    * **Accept a cap** (energy-based charging or a cap rebate): a responsive user (probability
      ``cap_elasticity`` x (1 + rebate), rebate 0 without a cap-rebate rule) runs every job with the
      device caps ``cap_cpu_w`` / ``cap_gpu_w`` (W per device; kept at the lower of an existing cap and
      this one). The power model slows the job by the Hsu-Feng stretch s of `power.profiles` (clock
      from the capped dynamic power, runtime x beta (1/f - 1) + 1), so the requested time grows to
      ceil(requested x s / s_before) (s_before: the stretch of the job's earlier cap, 1 without one)
      and a capped job is never killed for being capped. Needs ``system`` in `apply` and the profile
      columns (drawn by `materialize_profiles` when missing: call it first when comparing with a run
      without response, so both runs share the profiles); the caps must be above the devices' idle
      power (a cap at idle would stall the job).
    * **Fewer nodes** (energy-based charging): a responsive user (probability ``shrink_users``) asks
      for ``(1 - shrink_fraction)`` of the units of each multi-unit job; the runtime grows as
      (n / n')^``scaling_exponent`` (1 = perfect strong scaling; below 1 the smaller run is more
      efficient), and the requested time by the same factor.

    Jobs changed by the efficient choice are not also capped or shrunk. Node-hour charging gives none
    of these incentives, so the model changes nothing under it. Calibrated parameter sets:
    `UserResponse.preset` (``kamatar2025``, ``kamatar2025-homogeneous``, ``illustrative``).
    """

    shift_users: float = 0.0
    shift_elasticity: float = 1.0
    tolerance_h: float = 6.0
    cap_elasticity: float = 0.0
    cap_cpu_w: float | None = None
    cap_gpu_w: float | None = None
    shrink_users: float = 0.0
    shrink_fraction: float = 0.5
    scaling_exponent: float = 0.8
    efficient_users: float = 0.0
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN
    alternatives: tuple = ()
    choice_cap_fractions: tuple = ()

    def __post_init__(self):
        for k in ("shift_users", "shift_elasticity", "cap_elasticity", "shrink_users", "tolerance_h",
                  "efficient_users"):
            if not getattr(self, k) >= 0:
                raise PricingError(f"user response: {k} must be >= 0, got {getattr(self, k)!r}")
        if not 0 <= self.shrink_fraction < 1:
            raise PricingError(f"user response: shrink_fraction must be in [0, 1), got {self.shrink_fraction!r}")
        if not 0 < self.scaling_exponent <= 1.5:
            raise PricingError(f"user response: scaling_exponent must be in (0, 1.5], got {self.scaling_exponent!r}")
        if self.cap_elasticity > 0 and self.cap_cpu_w is None and self.cap_gpu_w is None:
            raise PricingError("user response: cap_elasticity > 0 needs cap_cpu_w and/or cap_gpu_w (W per device)")
        if not (self.max_slowdown >= 1 and math.isfinite(self.max_slowdown)):
            raise PricingError(f"user response: max_slowdown must be a finite number >= 1, got {self.max_slowdown!r}")
        try:
            alts = tuple((float(e), float(t)) for e, t in self.alternatives)
        except (TypeError, ValueError):
            raise PricingError("user response: alternatives must be (energy_ratio, runtime_ratio) pairs, got "
                               f"{self.alternatives!r}") from None
        for i, (e, t) in enumerate(alts):
            if not (e > 0 and t > 0 and math.isfinite(e) and math.isfinite(t)):
                raise PricingError(f"user response: alternatives[{i}] = ({e!r}, {t!r}): both ratios must be "
                                   "finite and > 0")
        self.alternatives = alts
        fr = tuple(float(f) for f in self.choice_cap_fractions)
        for f in fr:
            if not 0 < f <= 1:
                raise PricingError(f"user response: choice_cap_fractions must lie in (0, 1], got {f!r}")
        self.choice_cap_fractions = fr
        if self.efficient_users > 0 and not alts and not fr:
            raise PricingError("user response: efficient_users > 0 needs a menu: alternatives and/or "
                               "choice_cap_fractions")

    @classmethod
    def preset(cls, name: str) -> UserResponse:
        """A documented parameter set (see PRESETS): ``kamatar2025``, ``kamatar2025-homogeneous``,
        ``illustrative``. ``yang2013`` is a scheduler, not a user response: see
        `schedulers.price_aware.PriceAwareScheduler`."""
        if name == "yang2013":
            raise PricingError("user response preset 'yang2013': Yang et al. (SC'13) is a price-aware *scheduler*, "
                               "not a user response; use schedulers.price_aware.PriceAwareScheduler and "
                               "schedulers.price_aware.YANG2013")
        if name not in PRESETS:
            raise PricingError(f"unknown user response preset {name!r}; known: {', '.join(sorted(PRESETS))}, "
                               "and yang2013 (a scheduler)")
        return cls(**PRESETS[name])

    def apply(self, workload: Workload, rule: Rule, seed: int, system: Any = None,
              partition_nodes: int | None = None) -> tuple[Workload, dict]:
        """The workload users would submit under ``rule``, and counts of what changed.

        ``system`` (a system name, path or `twin.system.SystemSpec`) is needed by the efficient choice
        and the cap response. ``partition_nodes`` (nodes of each other-hardware partition, see
        `apply_partitioned`; default unlimited) keeps a job from choosing hardware too small for it.
        ``info`` holds ``shifted``, ``capped``, ``shrunk``, ``mean_shift_h``, and with a menu
        ``efficient_choice`` (jobs per option, `menu` order) and ``emulation`` (``below_idle``,
        ``above_max``: jobs whose chosen emulated hardware was clipped). The column
        ``efficient_choice`` of the result holds each job's option (-1: unchanged).
        """
        from hpctwin.twin.model_api import seeded_rng  # noqa: PLC0415
        rng = seeded_rng(seed, "user-response")
        wl = workload.take(np.arange(len(workload)))
        n = len(wl)
        users = np.unique(wl.user)
        uidx = np.searchsorted(users, wl.user)
        u_shift = rng.random(len(users)) < self.shift_users
        u_cap = rng.random(len(users))
        u_shrink = rng.random(len(users)) < self.shrink_users
        job_u = rng.random(n)
        job_eff = rng.random(n)
        info = {"shifted": 0, "capped": 0, "shrunk": 0, "mean_shift_h": 0.0}
        energy_based = rule.needs_energy
        rebate = _find_rebate(rule)
        changed = np.zeros(n, dtype=bool)
        # ---- shift
        if rule.time_varying and self.shift_users > 0:
            self._shift(wl, rule, u_shift[uidx], job_u, info)
        # ---- efficient choice
        if energy_based and self.efficient_users > 0:
            if system is None:
                raise PricingError("user response: the efficient choice (efficient_users > 0) needs the machine: "
                                   "apply(..., system=NAME_OR_SPEC)")
            chosen, counts, emu = self._choose(wl, job_eff < min(self.efficient_users, 1.0), system, seed,
                                               partition_nodes)
            changed |= chosen
            info["efficient_choice"] = counts
            info["emulation"] = emu
        # ---- caps
        if (energy_based or rebate > 0) and self.cap_elasticity > 0:
            take = (u_cap[uidx] < np.clip(self.cap_elasticity * (1.0 + rebate), 0, 1)) & ~changed
            info["capped"], info["cap_requests_extended"] = self._cap(wl, take, system, seed)
        # ---- fewer nodes
        if energy_based and self.shrink_users > 0:
            sh = u_shrink[uidx] & (wl.procs > 1) & ~changed
            newp = np.maximum(1, np.round(wl.procs * (1 - self.shrink_fraction))).astype(np.int64)
            factor = np.where(sh, wl.procs / np.maximum(newp, 1), 1.0) ** self.scaling_exponent
            wl.runtime = np.where(sh, np.ceil(wl.runtime * factor), wl.runtime)
            wl.requested_time = np.where(sh, np.ceil(wl.requested_time * factor), wl.requested_time)
            wl.procs = np.where(sh, newp, wl.procs)
            info["shrunk"] = int(sh.sum())
        wl.notes = list(wl.notes) + [f"user response under {rule.describe()}: {info}"]
        return wl.sorted(), info

    def apply_partitioned(self, workload: Workload, rule: Rule, seed: int, system: Any = None,
                          partition_nodes: int | None = None) -> tuple[dict[str, Workload], dict]:
        """`apply`, with the jobs split by the machine they run on (module docstring, "Partitions").

        Returns ``({HOME_PARTITION: jobs on the twin's machine, label: jobs on that other hardware,
        ...}, info)``: one entry per `alternatives` option that at least one job chose (labels from
        `menu`), each a `Workload` to run on its own partition of ``partition_nodes`` nodes (jobs
        larger than that do not choose it). Cap options stay on the home machine. ``info`` is
        `apply`'s, plus ``partitions`` (jobs per entry, in the returned order).
        """
        if partition_nodes is not None and not (isinstance(partition_nodes, (int, np.integer))
                                                and partition_nodes >= 1):
            raise PricingError(f"user response: partition_nodes must be an integer >= 1, got {partition_nodes!r}")
        wl, info = self.apply(workload, rule, seed, system=system, partition_nodes=partition_nodes)
        parts = split_by_hardware(wl, self)
        info["partitions"] = {k: len(v) for k, v in parts.items()}
        return parts, info

    def menu(self) -> list[str]:
        """Labels of the efficient-choice options, in the order of ``info['efficient_choice']``."""
        return ([f"alt(E x{e:.3g}, T x{t:.3g})" for e, t in self.alternatives]
                + [f"cap {f:g} x max" for f in self.choice_cap_fractions])

    def _shift(self, wl: Workload, rule: Rule, responsive: np.ndarray, job_u: np.ndarray, info: dict) -> None:
        """Delay the submissions of ``responsive`` jobs to the cheapest period within the tolerance (in place)."""
        tariff = _find_tariff(rule)
        tol = self.tolerance_h * 3600.0
        s = wl.submit
        bt, bv = tariff.breakpoints(float(s.min()), float(s.max()) + tol)
        i0 = np.clip(np.searchsorted(bt, s, side="right") - 1, 0, len(bt) - 1)
        p_now = bv[i0]
        best_p, best_t = p_now.copy(), s.copy()
        k = 1
        while True:
            ii = i0 + k
            valid = (ii < len(bt))
            if not valid.any():
                break
            iic = np.minimum(ii, len(bt) - 1)
            within = valid & (bt[iic] <= s + tol)
            if not within.any():
                break
            better = within & (bv[iic] < best_p)
            best_p = np.where(better, bv[iic], best_p)
            best_t = np.where(better, bt[iic], best_t)
            k += 1
        with np.errstate(divide="ignore", invalid="ignore"):
            saving = np.where(p_now > 0, (p_now - best_p) / p_now, 0.0)
        move = responsive & (best_t > s) & (job_u < np.clip(self.shift_elasticity * saving, 0, 1))
        if move.any():
            info["mean_shift_h"] = float(np.mean(best_t[move] - s[move]) / 3600.0)
        wl.submit = np.where(move, np.floor(best_t), s)
        info["shifted"] = int(move.sum())

    def _cap(self, wl: Workload, take: np.ndarray, system: Any, seed: int) -> tuple[int, int]:
        """Cap the ``take`` jobs at ``cap_cpu_w``/``cap_gpu_w`` and extend their requested time by the
        slowdown the cap implies (in place). Returns (jobs capped, requests extended)."""
        if system is None:
            raise PricingError("user response: accepting a cap (cap_elasticity > 0) needs the machine, to extend "
                               "the capped jobs' requested time by their slowdown: apply(..., system=NAME_OR_SPEC)")
        cfg = load_power_config(system)
        for field_, w, idle, dev in (("cap_cpu_w", self.cap_cpu_w, cfg.cpu_idle_w, "CPU"),
                                     ("cap_gpu_w", self.cap_gpu_w, cfg.gpu_idle_w, "GPU")):
            if w is not None and not float(w) > idle:
                raise PricingError(f"user response: {field_} = {float(w):g} W is not above the {dev} idle power "
                                   f"({idle:g} W) of system {system}: a cap at idle would stall the capped jobs")
        n = len(wl)
        cpu, gpu, beta = _ensure_profiles(wl, seed)
        c0, g0 = _caps(wl, "cpu_cap_w"), _caps(wl, "gpu_cap_w")
        st0 = _cap_stretch(cfg, cpu, gpu, beta, c0, g0)
        for col, w in (("cpu_cap_w", self.cap_cpu_w), ("gpu_cap_w", self.cap_gpu_w)):
            if w is not None:
                c = np.asarray(wl.columns.get(col, np.full(n, np.nan)), dtype=float).copy()
                c[take] = np.fmin(c[take], float(w))
                wl.columns[col] = c
        st1 = _cap_stretch(cfg, cpu, gpu, beta, _caps(wl, "cpu_cap_w"), _caps(wl, "gpu_cap_w"))
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(st0 > 0, st1 / st0, 1.0)
        req = np.asarray(wl.requested_time, dtype=float)
        new_req = _stretch_request(req, factor, take & (factor > 1.0))
        wl.requested_time = new_req
        wl.columns["capped"] = take
        return int(take.sum()), int(np.sum(new_req != req))

    def _choose(self, wl: Workload, responsive: np.ndarray, system: Any, seed: int,
                partition_nodes: int | None = None) -> tuple[np.ndarray, dict, dict]:
        """Apply the efficient choice in place to the ``responsive`` jobs; returns (changed mask, counts per
        option, emulation clip counts). Jobs of more than ``partition_nodes`` nodes cannot pick an
        alternative (its partition is too small)."""
        cfg = load_power_config(system)
        n = len(wl)
        cpu, gpu, beta = _ensure_profiles(wl, seed)
        ccap0, gcap0 = _caps(wl, "cpu_cap_w"), _caps(wl, "gpu_cap_w")
        eligible = responsive & np.isinf(ccap0) & np.isinf(gcap0) & (wl.runtime > 0)
        idle = cfg.node_idle_w
        p0 = cfg.node_power_w(cpu, gpu)
        dyn0 = np.maximum(p0 - idle, 0.0)
        ratios, slow, scale, below, above = [], [], [], [], []
        for e, t in self.alternatives:        # emulated hardware: its speed (runtime x t) and its power
            k, lo, hi = emulation_scale(cfg, cpu, gpu, e, t)
            ratios.append((idle + k * dyn0) * t / p0)
            slow.append(np.full(n, t))
            scale.append(k)
            below.append(lo)
            above.append(hi)
        caps = []
        for f in self.choice_cap_fractions:   # the machine's own operating points
            if cfg.gpus_per_node > 0:         # GPU machines: cap the GPUs (most of the power)
                cc, gc = math.inf, max(f * cfg.gpu_max_w, cfg.gpu_idle_w)
            else:                             # CPU-only machines: cap the CPUs
                cc, gc = max(f * cfg.cpu_max_w, cfg.cpu_idle_w), math.inf
            st = _cap_stretch(cfg, cpu, gpu, beta, cc, gc)
            ratios.append(cfg.node_power_w(cpu, gpu, cc, gc) * st / p0)
            slow.append(st)
            caps.append((cc, gc))
        R = np.vstack(ratios)
        S = np.vstack(slow)
        R = np.where(S <= self.max_slowdown * (1 + 1e-12), R, np.inf)
        if partition_nodes is not None and self.alternatives:
            R[:len(self.alternatives)] = np.where(np.asarray(wl.procs) > partition_nodes, np.inf,
                                                  R[:len(self.alternatives)])
        best = np.argmin(R, axis=0)
        gain = R[best, np.arange(n)] < 1.0 - 1e-9
        pick = np.where(eligible & gain, best, -1)
        counts = {}
        emu = {"below_idle": 0, "above_max": 0}
        n_alt = len(self.alternatives)
        req = np.asarray(wl.requested_time, dtype=float)
        run = np.asarray(wl.runtime, dtype=float).copy()
        factor = np.ones(n)
        for o, label in enumerate(self.menu()):
            m = pick == o
            counts[label] = int(m.sum())
            if not m.any():
                continue
            if o < n_alt:
                k = scale[o][m]
                cpu[m] = cpu[m] * k
                gpu[m] = gpu[m] * k
                run[m] = run[m] * self.alternatives[o][1]
                emu["below_idle"] += int(below[o][m].sum())
                emu["above_max"] += int(above[o][m].sum())
            else:
                cc, gc = caps[o - n_alt]
                for col, w in (("cpu_cap_w", cc), ("gpu_cap_w", gc)):
                    c = np.asarray(wl.columns.get(col, np.full(n, np.nan)), dtype=float).copy()
                    if math.isfinite(w):
                        c[m] = w
                    wl.columns[col] = c
            factor[m] = S[o, m]
        wl.runtime = run
        wl.requested_time = _stretch_request(req, factor, pick >= 0)
        wl.columns["cpu_util"], wl.columns["gpu_util"] = cpu, gpu
        wl.columns["efficient_choice"] = pick.astype(np.int64)
        return pick >= 0, counts, emu


def split_by_hardware(workload: Workload, response: UserResponse) -> dict[str, Workload]:
    """Split a workload made by ``response.apply`` by the machine each job runs on.

    ``{HOME_PARTITION: jobs that kept the twin's hardware (no choice, or a cap option), label: jobs
    that chose that alternative, ...}``, labels from ``response.menu()``, alternatives no job chose
    left out. Needs the ``efficient_choice`` column when ``response`` has alternatives (a workload
    without it, e.g. under node-hour charging, is all home).
    """
    n_alt = len(response.alternatives)
    if "efficient_choice" in workload.columns:
        pick = np.asarray(workload.columns["efficient_choice"], dtype=np.int64)
    else:
        pick = np.full(len(workload), -1, dtype=np.int64)
    if len(pick) and pick.max() >= len(response.menu()):
        raise PricingError(f"split_by_hardware: workload {workload.name!r} has efficient_choice {int(pick.max())} "
                           f"but the response's menu has {len(response.menu())} options")
    alt = np.where((pick >= 0) & (pick < n_alt), pick, -1)
    out = {HOME_PARTITION: workload.take(np.flatnonzero(alt < 0))}
    labels = response.menu()
    for o in range(n_alt):
        idx = np.flatnonzero(alt == o)
        if len(idx):
            out[labels[o]] = workload.take(idx)
    return out


def calibrate(workload: Workload, system: Any, target: float, *, rule: Rule | None = None,
              base: UserResponse | None = None, seed: int = 0, nodes: int | None = None,
              partition_nodes: int | None = None, tol: float = 0.005) -> tuple[UserResponse, float]:
    """Fit ``efficient_users`` of ``base`` so the jobs' energy falls by ``target`` (a fraction).

    The reduction compares the predicted jobs' energy (`predicted_job_energy_j`) of the workload users
    submit under ``rule`` (default: energy at a flat price) with the unchanged workload (node-hour
    charging gives no incentive). Bisection over [0, 1]: the reduction grows with the parameter
    (jobs respond in the order of their uniform draw, so the responding set only grows); it is a
    step function (one step per job), so the result is the step closest to ``target``. Profiles are
    materialised first (`materialize_profiles`). ``partition_nodes``: the size of each other-hardware
    partition (as in `UserResponse.apply_partitioned`; jobs larger than it keep the home machine).
    The jobs' energy does not depend on the schedule or on which partition a job runs in (no
    facility power cap), so this prediction is also what the partitioned what-if measures, summed over
    partitions. Returns (the fitted response, the reduction it gives). Raises `PricingError` when even
    ``efficient_users = 1`` falls short of ``target - tol``.
    """
    if not 0 < target < 1:
        raise PricingError(f"calibrate: target must be a fraction in (0, 1), got {target!r}")
    base = base if base is not None else UserResponse.preset("kamatar2025")
    rule = rule if rule is not None else EnergyCharge(FlatPrice(1.0))
    if not rule.needs_energy:
        raise PricingError(f"calibrate: rule {rule.describe()} gives no energy incentive")
    wl = materialize_profiles(workload, seed)
    e0 = float(predicted_job_energy_j(wl, system, nodes).sum())
    if not e0 > 0:
        raise PricingError(f"calibrate: workload {workload.name!r} has no job energy on this machine")

    def reduction(a: float) -> float:
        r = _replace(base, efficient_users=a)
        w2, _ = r.apply(wl, rule, seed, system=system, partition_nodes=partition_nodes)
        return 1.0 - float(predicted_job_energy_j(w2, system, nodes).sum()) / e0

    top = reduction(1.0)
    if top < target - tol:
        raise PricingError(f"calibrate: target {target:.1%} is out of reach on {workload.name} with this menu "
                           f"({', '.join(base.menu())}, max_slowdown {base.max_slowdown:g}): even with every user "
                           f"responding the jobs' energy falls by {top:.1%}")
    lo, hi, r_lo, r_hi = 0.0, 1.0, 0.0, top
    while hi - lo > 1e-6:
        mid = 0.5 * (lo + hi)
        r = reduction(mid)
        if r < target:
            lo, r_lo = mid, r
        else:
            hi, r_hi = mid, r
    a, got = (lo, r_lo) if abs(r_lo - target) < abs(r_hi - target) else (hi, r_hi)
    return _replace(base, efficient_users=a), got


def _replace(r: UserResponse, **kw) -> UserResponse:
    d = asdict(r)
    d.update(kw)
    return UserResponse(**d)


PRESETS: dict[str, dict] = {
    # Kamatar et al. (SC'25): users choose more efficient resources when charged for energy. The menu is
    # the measured older GPUs (each its own partition, emulated at their speed and power) plus the machine's own
    # cap levels; the share of responding jobs is fitted to the 40 % anchor (KAMATAR2025_EFFICIENT_USERS,
    # see `calibrate`).
    "kamatar2025": {"efficient_users": KAMATAR2025_EFFICIENT_USERS, "max_slowdown": DEFAULT_MAX_SLOWDOWN,
                    "alternatives": KAMATAR_GPU_ALTERNATIVES, "choice_cap_fractions": DEFAULT_CHOICE_CAP_FRACTIONS},
    # The same incentive on a homogeneous machine: only the machine's cap levels, every job responding
    # (an upper bound of what configuration choice alone gives).
    "kamatar2025-homogeneous": {"efficient_users": 1.0, "max_slowdown": DEFAULT_MAX_SLOWDOWN,
                                "choice_cap_fractions": DEFAULT_CHOICE_CAP_FRACTIONS},
    # The earlier illustrative inputs of experiments/incentives_whatif.py (not fitted to anything).
    "illustrative": {"shift_users": 0.5, "shift_elasticity": 1.0, "tolerance_h": 6.0, "cap_elasticity": 0.3,
                     "cap_gpu_w": 400.0, "shrink_users": 0.2, "shrink_fraction": 0.5, "scaling_exponent": 0.8},
}


def _find_tariff(rule: Rule) -> Tariff:
    if isinstance(rule, EnergyCharge):
        return rule.price
    for sub in getattr(rule, "rules", []) + [getattr(rule, "base", None)]:
        if sub is not None and sub.time_varying:
            return _find_tariff(sub)
    raise PricingError(f"rule {rule.describe()} has no time-varying energy price")


def _find_rebate(rule: Rule) -> float:
    if isinstance(rule, CapRebate):
        return rule.rebate
    for sub in getattr(rule, "rules", []) + [getattr(rule, "base", None)]:
        if sub is not None:
            r = _find_rebate(sub)
            if r:
                return r
    return 0.0
