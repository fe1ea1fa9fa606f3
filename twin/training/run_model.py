"""The first-principles training model as a physics model of ``hpctwin run`` (``--set training.enabled=true``).

`TrainingRunModel` (a `twin.model_api.RunModel`) costs every LLM training job of a run with
`twin.training.iteration.iteration_time` on the nodes the job actually got, over the run's system
(its ``[network]`` topology graph, `comm.GraphFabric`), and sets the job's progress rate with the
stretch semantics of `topology.llm_iteration.LLMIterationModel`:

    rate = min(1, T(ideal) / T(actual))

where ``T(ideal)`` is the iteration time on the first ``n`` nodes of an empty machine (the fewest
groups, contiguous; `topology.llm_iteration.ideal_nodes`) and ``T(actual)`` on the job's nodes. The
log's runtime is taken to be the runtime at the ideal placement (assumption, as in LLMIterationModel).

**Training jobs**: rows with ``tp``, ``pp``, ``dp`` >= 1 and a model (workload columns of
`datasets.llm_synthetic`: ``llm_hidden``, ``llm_layers``; batch ``seq_len``, ``global_batch``,
``micro_batch``). The transformer is GPT-style from the job's columns (``heads = hidden / 128``,
``ffn = 4 hidden``, vocabulary 51,200 as in Narayanan et al. SC'21: assumptions), or the
`twin.training.models.MODELS` preset named by option ``model`` for every job.

**Ranks**: one rank per GPU of the run's system (``gpus_per_node`` of the system file). The GPU is
the `twin.training.hardware` preset of the system (by name: ``dgx-h100``, ``frontier``), or option
``gpu`` (a `hardware.GPUS` name). When the preset counts ``k`` devices where the system file
counts one (Frontier: 8 GCDs vs 4 MI250X modules), a rank is ``k`` devices: ``k`` x the peak
FLOP/s, memory and HBM bandwidth, the preset's intra-node links (assumption: a module trained as
one rank).

**Contention**: with the network model on (``--network on``), the actual placement is costed with
the other running jobs' link loads (`topology.contention.NetworkContentionModel.load_full`, bytes/s
per directed link, capped at 90 % of a link) as background; otherwise option ``background`` (a
share of every global link busy with other jobs; the busy-machine view) applies to both placements.
The network model's own contention factor still applies to the job (its ``comm_fraction``).

**Refusal**: at bind time (before the first event) every training job is checked: its layout
(`config.validate`), its node count (``ceil(tp pp dp / gpus_per_node)`` nodes), TP within a node
(unless ``allow_tp_across_nodes``) and its memory per GPU (`memory.memory_per_gpu`) against the
GPU's usable memory. The first job that cannot run stops the run with a one-line
`twin.errors.RunConfigError` naming the job, the figure and the fix (the engine has no per-job
rejection at submission; a gate refusal would leave the job waiting forever).

jobs.csv columns (only when the model is on): ``job_class``, ``tp``, ``pp``, ``dp`` (0 for other
jobs), ``iteration_s`` (s, actual placement, last start), ``tflops_per_gpu`` (achieved, Narayanan
et al.'s count with recomputation), ``memory_per_gpu_bytes`` (NaN for other jobs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from hpctwin.twin.errors import RunConfigError
from hpctwin.twin.model_api import RunModel
from hpctwin.twin.plugins import option

from .config import RECOMPUTE, BatchConfig, ParallelConfig, TrainingConfigError, validate
from .constants import CONSTANTS
from .hardware import GIB, GPUS, SYSTEMS, Machine, SystemPreset
from .iteration import iteration_time
from .memory import memory_per_gpu
from .models import MODELS, TransformerModel

#: head dimension and vocabulary of the GPT-style model built from a job's columns (Narayanan et
#: al. SC'21, Table 1: 128-wide heads, V = 51,200): assumptions
HEAD_DIM = 128
VOCAB = 51200
#: the largest share of a link the other jobs' load may take in the background (the rest is the job's)
MAX_BACKGROUND = 0.9


@dataclass(frozen=True)
class TrainingOptions:
    """``--set training.KEY``: the first-principles training model in runs (`twin.training.run_model`)."""

    enabled: bool = option(False, help="turn the training model on")
    model: str | None = option(None, help="twin.training model preset for every LLM training job "
                                          "(default: GPT-style from the job's llm_hidden/llm_layers columns)")
    recompute: str = option("selective", choices=RECOMPUTE, help="activation recomputation of every job")
    zero: int = option(1, minimum=0, maximum=3, help="ZeRO stage of every job (1: distributed optimizer)")
    gpu: str | None = option(None, help="GPU of a rank (twin.training.hardware.GPUS; default: the system's preset)")
    background: float = option(0.0, minimum=0.0, maximum=MAX_BACKGROUND,
                               help="share of every global link busy with other jobs (without --network on)")
    routing: str = option("minimal", choices=("minimal", "valiant"), help="routing of the job's collectives")
    allow_tp_across_nodes: bool = option(False, help="let a TP group span nodes (refused otherwise)")


def build(setup) -> "TrainingRunModel":
    """The model of a run (`twin.models.ModelSetup`): its typed ``training`` options checked here."""
    opts = TrainingOptions(**{k: v for k, v in setup.options("training").items()
                              if k in TrainingOptions.__dataclass_fields__})
    if opts.model is not None and opts.model not in MODELS:
        raise RunConfigError(f"--set training.model={opts.model}: unknown model; known: {', '.join(MODELS)}")
    if opts.gpu is not None and opts.gpu not in GPUS:
        raise RunConfigError(f"--set training.gpu={opts.gpu}: unknown GPU; known: {', '.join(GPUS)}")
    return TrainingRunModel(opts)


def rank_gpu(system_name: str, gpus_per_node: int, gpu: str | None = None) -> tuple[object, float]:
    """(`hardware.GPU` of one rank, inter-node alpha in s) for a system file's node of ``gpus_per_node``
    GPUs (see the module docstring); RunConfigError when neither a preset nor ``gpu`` names it."""
    preset = SYSTEMS.get(system_name)
    alpha = preset.net_alpha if preset is not None else 5e-6
    if gpu is not None:
        return GPUS[gpu], alpha
    if preset is None:
        raise RunConfigError(f"--set training.enabled=true: system {system_name!r} has no twin.training preset "
                             f"({', '.join(SYSTEMS)}); name its GPU with --set training.gpu=NAME "
                             f"({', '.join(GPUS)})")
    g = preset.gpu
    k = preset.gpus_per_node // gpus_per_node if preset.gpus_per_node % gpus_per_node == 0 else 1
    if k > 1:
        g = replace(g, name=f"{k}x{g.name}", peak_flops=k * g.peak_flops, memory_bytes=k * g.memory_bytes,
                    hbm_bw=k * g.hbm_bw)
    return g, alpha


def gpt_model(hidden: int, layers: int) -> TransformerModel:
    """A GPT-style transformer of ``hidden`` width and ``layers`` layers (`HEAD_DIM`, `VOCAB`)."""
    heads = max(1, int(hidden) // HEAD_DIM)
    return TransformerModel(f"gpt-h{int(hidden)}-l{int(layers)}", int(layers), int(hidden), heads, heads,
                            4 * int(hidden), VOCAB)


class TrainingRunModel(RunModel):
    """Iteration time, achieved FLOP/s and memory of LLM training jobs on their placement (module doc)."""

    name = "training"

    def __init__(self, options: TrainingOptions | None = None):
        self.opts = options or TrainingOptions()
        self.network = None

    def use_models(self, models: dict) -> None:
        """The run's network model, when on (its per-link loads are the background of a start)."""
        self.network = models.get("network")

    # ------------------------------------------------------------------ setup
    def bind(self, ctx) -> None:
        super().bind(ctx)
        sysm = ctx.system
        if sysm is None or not sysm.network or not sysm.gpus_per_node:
            raise RunConfigError("--set training.enabled=true needs a --system with a [network] table and "
                                 "gpus_per_node > 0")
        n_nodes = int(ctx.n_nodes)
        self.G = int(sysm.gpus_per_node)
        gpu, alpha = rank_gpu(sysm.name, self.G, self.opts.gpu)
        from hpctwin.topology.presets import network_params  # noqa: PLC0415
        hw = SystemPreset(sysm.name, gpu, self.G, dict(sysm.network), machine_nodes=n_nodes, net_alpha=alpha)
        self.hw = hw
        self.machine = Machine(hw, n_nodes, dict(sysm.network), network_params(sysm.network, n_nodes))
        cols = ctx.jobs.columns or {}
        n = len(ctx.jobs)
        jc = cols.get("job_class")
        self.job_class = (np.asarray(jc, dtype=object).copy() if jc is not None else np.full(n, "", dtype=object))
        self.tp, self.pp, self.dp = (np.zeros(n, np.int64) for _ in range(3))
        self.iter_s = np.full(n, np.nan)
        self.iter_ideal = np.full(n, np.nan)
        self.tflops = np.full(n, np.nan)
        self.mem = np.full(n, np.nan)
        self._job: dict[int, tuple] = {}
        self._ideal: dict = {}
        if all(k in cols for k in ("tp", "pp", "dp")):
            self._check_jobs(ctx.jobs, cols)

    def _job_spec(self, cols: dict, j: int) -> tuple | None:
        """(model, ParallelConfig, BatchConfig) of job ``j``, or None when it is not a training job."""
        tp, pp, dp = int(cols["tp"][j]), int(cols["pp"][j]), int(cols["dp"][j])
        if min(tp, pp, dp) < 1:
            return None
        if self.opts.model is not None:
            model = MODELS[self.opts.model]
        else:
            h, lay = cols.get("llm_hidden"), cols.get("llm_layers")
            if h is None or lay is None or not int(h[j]) > 0 or not int(lay[j]) > 0:
                return None
            model = gpt_model(int(h[j]), int(lay[j]))

        def col(k: str, default: int) -> int:
            v = cols.get(k)
            return default if v is None or not v[j] > 0 else int(v[j])

        batch = BatchConfig(col("seq_len", 4096), col("global_batch", 32 * dp), col("micro_batch", 1))
        par = ParallelConfig(tp=tp, pp=pp, dp=dp, sp=tp > 1, zero=int(self.opts.zero), recompute=self.opts.recompute)
        return model, par, batch

    def _check_jobs(self, jobs, cols: dict) -> None:
        """Fill the shape and memory columns; refuse the first training job that cannot run (module doc)."""
        gpu = self.hw.gpu
        usable = gpu.memory_bytes - CONSTANTS.reserve_bytes
        mem_cache: dict = {}
        for j in range(len(jobs)):
            spec = self._job_spec(cols, j)
            if spec is None:
                continue
            model, par, batch = spec
            jid = int(jobs.job_id[j])
            what = f"training model: job {jid} (tp {par.tp} x pp {par.pp} x dp {par.dp}, {model.name})"
            try:
                validate(model, par, batch)
            except TrainingConfigError as e:
                raise RunConfigError(f"{what}: {e}") from None
            if (par.tp > self.G or self.G % par.tp) and not self.opts.allow_tp_across_nodes:
                raise RunConfigError(f"{what}: TP = {par.tp} does not fit the {self.G} GPUs of a node (a TP group "
                                     f"would span nodes); use a tp dividing {self.G} (llm-synthetic:...,"
                                     f"gpus_per_node={self.G}) or --set training.allow_tp_across_nodes=true")
            need = math.ceil(par.gpus / self.G)
            if int(jobs.procs[j]) != need:
                raise RunConfigError(f"{what}: {par.gpus} GPUs need {need} nodes of {self.G} GPUs but the job asks "
                                     f"for {int(jobs.procs[j])}; generate the workload for this machine "
                                     f"(llm-synthetic:...,gpus_per_node={self.G})")
            key = (model, par, batch)
            mem = mem_cache.get(key)
            if mem is None:
                mem = mem_cache[key] = memory_per_gpu(model, par, batch, gpu.memory_bytes)
            if not mem.fits:
                raise RunConfigError(f"{what}: needs {mem.total / GIB:.1f} GiB per GPU > {usable / GIB:.1f} GiB "
                                     f"usable on {gpu.name}; use --set training.zero=3, "
                                     "--set training.recompute=full or more pipeline stages")
            self.tp[j], self.pp[j], self.dp[j] = par.tp, par.pp, par.dp
            self.mem[j] = mem.total
            self._job[j] = spec

    # ------------------------------------------------------------------ events
    def _background(self, nodes: np.ndarray):
        """The background of a start: the network model's per-link loads of the other jobs, else the option."""
        net = self.network
        load = getattr(net, "load_full", None) if net is not None else None
        router = getattr(net, "router", None) if net is not None else None
        if load is not None and router is not None and len(nodes) > 1:
            bw = np.asarray(router.bandwidth, dtype=np.float64)
            return np.minimum(np.asarray(load, dtype=np.float64), MAX_BACKGROUND * bw)
        return self.opts.background or None

    def _time(self, spec: tuple, nodes: np.ndarray, background):
        model, par, batch = spec
        return iteration_time(model, self.hw, par, batch, nodes=nodes, system=self.machine, background=background,
                              routing=self.opts.routing, allow_tp_across_nodes=self.opts.allow_tp_across_nodes)

    def on_start(self, now, job, nodes):
        spec = self._job.get(job)
        if spec is None:
            return None
        nodes = np.unique(np.asarray(nodes, dtype=np.int64))
        key = (spec, len(nodes))
        ref = self._ideal.get(key)
        if ref is None:
            ref = self._ideal[key] = self._time(spec, np.arange(len(nodes), dtype=np.int64),
                                                self.opts.background or None).total
        try:
            act = self._time(spec, nodes, self._background(nodes))
        except TrainingConfigError as e:      # e.g. a per-link background the router cannot take
            raise RunConfigError(f"training model: job {int(self.ctx.jobs.job_id[job])}: {e}") from None
        self.iter_s[job] = act.total
        self.iter_ideal[job] = ref
        self.tflops[job] = act.tflops_per_gpu
        rate = min(1.0, ref / act.total)
        return {job: rate} if rate < 1.0 else None

    # ------------------------------------------------------------------ outputs
    def job_columns(self) -> dict[str, np.ndarray]:
        return {"job_class": self.job_class, "tp": self.tp, "pp": self.pp, "dp": self.dp,
                "iteration_s": self.iter_s, "tflops_per_gpu": self.tflops, "memory_per_gpu_bytes": self.mem}

    def summary(self) -> dict:
        sl = self.iter_s / self.iter_ideal
        ok = np.isfinite(sl)
        return {"training_jobs": int(ok.sum()),
                "training_mean_iteration_slowdown": float(sl[ok].mean()) if ok.any() else None,
                "training_max_iteration_slowdown": float(sl[ok].max()) if ok.any() else None,
                "training_mean_tflops_per_gpu": float(np.nanmean(self.tflops[ok])) if ok.any() else None}
