"""Multi-SLO serving (issue 28 items 1 and 2): request classes, deadline-slack scheduling, admission control.

* **Classes** (`SLOClass`): a name, a TTFT target and a TPOT target (s), and a share of the requests.
  `DEFAULT_CLASSES`: ``tight`` (TTFT <= 1 s, TPOT <= 0.08 s, 20 %), ``standard`` (3 s, 0.15 s, 50 %),
  ``relaxed`` (10 s, 0.3 s, 30 %). A request's class is its ``klass`` (the index into the class list):
  from the trace when it has one (`ServingRequest.klass`), else drawn by `assign_classes` (a seeded rule).
* **Slack scheduling** (`SlackPolicy`, ``Instance(policy="slack")``): before each iteration the instance
  orders its running requests (decodes before prompt chunks, so a decode is never starved of the token
  budget) and its waiting queue by deadline slack, least slack first:
  ``slack = deadline - now - predicted work``. The deadline of a request without a token yet is
  ``arrival + TTFT target``; after its k-th token it is ``first + k * TPOT target`` (the next token keeps
  the mean TPOT within target). The predicted work is the time of its remaining prompt tokens (chunks of
  the token budget) by the instance's own latency model (`prefill_s`), 0 for a decode step. When KV
  blocks run short the running request with the most slack is preempted (recompute, as vLLM V1 does).
  The iteration's token budget is cut so that it ends by the earliest next-token deadline of its running
  decodes, never below ``min_chunk`` (512) prompt tokens (`SlackPolicy.budget`).
* **Admission control** (``admission``): ``none`` orders by slack only; ``defer`` puts the requests that
  can no longer meet their deadline (negative slack) behind every request that can, in arrival order;
  ``shed`` drops a waiting request without a token whose TTFT can no longer be met (it is reported in the
  instance's ``shed`` list and ``Req.shed``, and counts as missing its SLO).
* **Attainment** (`attainment_by_class`): a request meets its class when TTFT = first - arrival <= the
  TTFT target and TPOT = (last - first) / max(1, output - 1) <= the TPOT target (shed: missed).

Times are seconds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

import numpy as np

from hpctwin.datasets.serving_traces import ServingRequest

from .metrics import fifteen, latencies

if TYPE_CHECKING:  # pragma: no cover
    from .instance import Instance, Req


@dataclass(frozen=True)
class SLOClass:
    """A request class: ``name``, TTFT and TPOT targets (s), and its ``share`` of the requests (0-1)."""
    name: str
    ttft_s: float
    tpot_s: float
    share: float = 0.0


#: the default classes: tightest first (``klass`` 0), shares summing to 1
DEFAULT_CLASSES: tuple[SLOClass, ...] = (
    SLOClass("tight", 1.0, 0.08, 0.2),
    SLOClass("standard", 3.0, 0.15, 0.5),
    SLOClass("relaxed", 10.0, 0.3, 0.3),
)


def check_classes(classes: Sequence[SLOClass]) -> tuple[SLOClass, ...]:
    """``classes`` as a tuple after checking them (a ValueError naming the class and field otherwise)."""
    classes = tuple(classes)
    if not classes:
        raise ValueError("SLO classes: at least one class is needed")
    names = set()
    for k, c in enumerate(classes):
        for f in ("ttft_s", "tpot_s"):
            v = getattr(c, f)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"SLO class {k} ({c.name!r}): {f} must be a positive number of seconds, got {v!r}")
        if not (0.0 <= c.share <= 1.0):
            raise ValueError(f"SLO class {k} ({c.name!r}): share must be within 0-1, got {c.share!r}")
        if c.name in names:
            raise ValueError(f"SLO class {k}: name {c.name!r} is used twice")
        names.add(c.name)
    total = sum(c.share for c in classes)
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"SLO classes: shares sum to {total:g}, expected 1 (e.g. 0.2, 0.5, 0.3)")
    return classes


def assign_classes(trace: Sequence[ServingRequest], classes: Sequence[SLOClass] = DEFAULT_CLASSES,
                   seed: int = 0, keep_trace: bool = True) -> list[ServingRequest]:
    """Copies of ``trace``'s requests with their ``klass`` (index into ``classes``) drawn independently with
    probabilities the classes' shares (``numpy.random.default_rng(seed)``, one draw per request in trace
    order). ``keep_trace``: a trace whose requests carry classes already (any ``klass`` != 0) keeps them
    (a class out of range: a ValueError naming the request)."""
    classes = check_classes(classes)
    if keep_trace and any(r.klass for r in trace):
        for i, r in enumerate(trace):
            if not 0 <= r.klass < len(classes):
                raise ValueError(f"request {i}: class {r.klass} out of range 0..{len(classes) - 1}")
        return list(trace)
    p = np.array([c.share for c in classes], float)
    draw = np.random.default_rng(seed).choice(len(classes), size=len(trace), p=p / p.sum())
    return [replace(r, klass=int(k)) for r, k in zip(trace, draw)]


def prefill_s(x: "Instance", tokens: int, decodes: int = 0) -> float:
    """Predicted time (s) of ``tokens`` prompt tokens on instance ``x`` by its own latency model: chunks of
    its token budget (less ``decodes`` one-token decodes sharing each iteration), each timed as one
    iteration of that chunk plus the decodes; 0 for at most one token (a decode step)."""
    if tokens <= 1:
        return 0.0
    cache = x.__dict__.setdefault("_slo_cost", {})
    key = (tokens, decodes)
    v = cache.get(key)
    if v is None:
        per = max(1, x.budget - decodes) if x.chunked else tokens
        full, rest = divmod(tokens, per)
        v = 0.0
        if full:
            v += full * x.model.iteration_s(per + decodes, 1 + decodes, per, 0, decodes, 0, 0, 0)
        if rest:
            v += x.model.iteration_s(rest + decodes, 1 + decodes, rest, 0, decodes, 0, 0, 0)
        cache[key] = v
    return v


def deadline(r: "Req", c: SLOClass) -> float:
    """The time (s) by which ``r``'s next token is due: ``arrival + TTFT target`` before its first token,
    ``first + generated * TPOT target`` after."""
    if r.generated == 0:
        return r.arrival + c.ttft_s
    return r.first + r.generated * c.tpot_s


class SlackPolicy:
    """Deadline-slack ordering, preemption choice and admission control of one instance (module docstring)."""

    def __init__(self, x: "Instance", classes: Sequence[SLOClass] | None = None, admission: str = "none") -> None:
        self.x = x
        self.classes = check_classes(classes if classes is not None else DEFAULT_CLASSES)
        self.admission = admission
        #: fewest prompt tokens an iteration may carry past its decodes when decodes are due (`budget`)
        self.min_chunk = 512
        x.slo = self.classes

    def cls(self, r: "Req") -> SLOClass:
        """``r``'s class (a ValueError naming the request when its ``klass`` is out of range)."""
        k = r.klass
        if not 0 <= k < len(self.classes):
            raise ValueError(f"request {r.uid}: class {k} out of range 0..{len(self.classes) - 1}")
        return self.classes[k]

    def slack(self, r: "Req", now: float) -> float:
        """``deadline - now - predicted work`` (s) of ``r`` on this instance."""
        return deadline(r, self.cls(r)) - now - prefill_s(self.x, r.num_tokens - r.computed)

    def scale(self, r: "Req") -> float:
        """The time scale (s) of ``r``'s next deadline: its class's TTFT target before its first token, its
        TPOT target after; the waiting queue is ordered by slack relative to it (a tight class's second
        counts more)."""
        c = self.cls(r)
        return c.ttft_s if r.generated == 0 else c.tpot_s

    def order(self, now: float) -> None:
        """Sort running and waiting by slack (least first; ties by arrival, then id); apply admission control."""
        x = self.x
        if len(x.running) > 1:
            x.running.sort(key=lambda q: (q.num_tokens - q.computed > 1, self.slack(q, now), q.arrival, q.uid))
        if not x.waiting:
            return
        keyed = [(self.slack(q, now) / self.scale(q), q) for q in x.waiting]
        if self.admission == "shed":
            keep = []
            for s, q in keyed:
                if s < 0 and q.generated == 0:
                    q.shed = True
                    x.shed.append(q)
                    x.outstanding -= 1
                else:
                    keep.append((s, q))
            keyed = keep
        if self.admission == "defer":
            keyed.sort(key=lambda e: (0, e[0], e[1].arrival, e[1].uid) if e[0] >= 0
                       else (1, e[1].arrival, 0.0, e[1].uid))
        else:
            keyed.sort(key=lambda e: (e[0], e[1].arrival, e[1].uid))
        x.waiting.clear()
        x.waiting.extend(q for _, q in keyed)

    def budget(self, now: float) -> int:
        """The token budget of the next iteration (tokens): the instance's ``max_num_batched_tokens``, cut so
        that the iteration (its decodes plus a prompt chunk) ends by the earliest next-token deadline of its
        running decodes (`deadline`), but never below ``min_chunk`` prompt tokens past the decodes (progress)."""
        x = self.x
        dec = [q for q in x.running if q.generated and q.computed >= q.num_tokens - 1]
        full = x.budget
        if not dec or len(dec) >= full or len(x.running) == len(dec) and not x.waiting:
            return full
        allowed = min(deadline(q, self.cls(q)) for q in dec) - now
        nd = len(dec)
        kv = [q.computed for q in dec]
        kvd, kmax, kmin = sum(kv) // nd, max(kv), min(kv)

        def t_of(p: int) -> float:
            return x.model.iteration_s(nd + p, nd + 1, p, 0, nd, kvd, kmax, kmin)
        lo, hi = min(self.min_chunk, full - nd), full - nd
        if t_of(hi) <= allowed:
            return full
        if t_of(lo) >= allowed:
            return nd + lo
        while hi - lo > 16:                 # largest chunk (to 16 tokens) whose iteration meets ``allowed``
            mid = (lo + hi) // 2
            if t_of(mid) <= allowed:
                lo = mid
            else:
                hi = mid
        return nd + lo

    def victim(self, running: Sequence["Req"], now: float) -> "Req":
        """The running request to preempt: the most slack (ties: the latest arrival, then the largest id)."""
        return max(running, key=lambda q: (self.slack(q, now), q.arrival, q.uid))


def attainment_by_class(reqs: Sequence["Req"], classes: Sequence[SLOClass]) -> dict[int, np.ndarray]:
    """Per class index: a boolean array, one entry per request of that class, True when it met both targets
    (a shed request: False)."""
    out: dict[int, list] = {k: [] for k in range(len(classes))}
    for r in reqs:
        c = classes[r.klass]
        if r.shed or not math.isfinite(r.first):
            out[r.klass].append(False)
            continue
        ttft = r.first - r.arrival
        tpot = (r.last - r.first) / max(1, r.output - 1)
        out[r.klass].append(ttft <= c.ttft_s and tpot <= c.tpot_s)
    return {k: np.array(v, bool) for k, v in out.items()}


def _cached_tokens(x: "Instance", r: "Req") -> int:
    """Prompt tokens of ``r`` already in ``x``'s prefix cache (0 without caching); ``r``'s own hash list is
    left as it was."""
    kv = x.kv
    if not kv.caching:
        return 0
    saved = r.hashes
    r.hashes = []
    try:
        hashes = r.block_hashes(r.prompt, kv.block_size)
    finally:
        r.hashes = saved
    return len(kv.computed_blocks(hashes, r.prompt)) * kv.block_size


def predicted_ttft(x: "Instance", r: "Req", now: float) -> float:
    """Predicted time (s) from ``now`` to ``r``'s first token on instance ``x`` (`routers` ``slo_aware``)."""
    classes = x.slo if x.slo is not None else DEFAULT_CLASSES
    k = r.klass if 0 <= r.klass < len(classes) else len(classes) - 1
    due = r.arrival + classes[k].ttft_s
    ahead = sum(q.num_tokens - q.computed for q in x.running if q.computed < q.num_tokens - 1)
    for q in x.waiting:
        if x.slack is None or deadline(q, classes[q.klass if 0 <= q.klass < len(classes) else -1]) <= due:
            ahead += q.num_tokens - q.computed
    mine = max(1, r.prompt - _cached_tokens(x, r))
    nd = sum(1 for q in x.running if q.computed >= q.num_tokens - 1)
    t = max(0.0, x.t - now) + prefill_s(x, ahead + mine, min(nd, max(0, x.budget - 1)))
    kv = x.kv
    queued_blocks = sum(-(-(q.num_tokens - q.computed) // kv.block_size) for q in x.waiting)
    if kv.free - queued_blocks < -(-(mine + 1) // kv.block_size) and x.running:
        rest = min(q.output - q.generated for q in x.running)
        t += rest * x.model.iteration_s(nd, nd, 0, 0, nd, 0, 0, 0) if nd else 0.0
    return t


def predicted_tpot(x: "Instance", r: "Req") -> float:
    """Predicted time per output token (s) of ``r``, whose prompt is computed (a P/D hand-off), on decode
    instance ``x`` by its own latency model: its remaining tokens each one decode iteration beside the
    requests already there (running, waiting, KV in flight: ``inbound``), plus, when its free KV blocks
    (after its queue) or its sequence slots cannot take ``r`` now, the time of its shortest remaining
    decode, spread over ``r``'s remaining tokens."""
    kv = x.kv
    nd = min(x.max_num_seqs, len(x.running) + len(x.waiting) + x.inbound + 1)
    ctx = [q.num_tokens for q in x.running] + [r.num_tokens]
    kvd, kmax, kmin = sum(ctx) // len(ctx), max(ctx), min(ctx)
    step = x.model.iteration_s(nd, nd, 0, 0, nd, kvd, kmax, kmin)
    rest = max(1, r.output - r.generated)
    queued_blocks = sum(-(-(q.num_tokens - q.computed) // kv.block_size) for q in x.waiting)
    need = -(-(r.num_tokens + 1) // kv.block_size)
    wait = 0.0
    full = len(x.running) + len(x.waiting) + x.inbound >= x.max_num_seqs
    if x.running and (kv.free - queued_blocks < need or full):
        left = min(q.output - q.generated for q in x.running)
        run = len(x.running)
        wait = left * x.model.iteration_s(run, run, 0, 0, run, kvd, kmax, kmin)
    return step + wait / rest


def slo_aware_router():
    """A ``pick(instances, request)``: on prefill and colocated instances the smallest `predicted_ttft` (the
    request's arrival is the routing time: the engine routes at arrival); on decode instances (the P/D
    hand-off, chosen when the prompt completes) the smallest `predicted_tpot`. Ties: fewest outstanding,
    then the lowest id."""
    def pick(instances: Sequence["Instance"], r: "Req") -> "Instance":
        if instances[0].role == "decode":
            return min(instances, key=lambda x: (predicted_tpot(x, r), x.outstanding, x.iid))
        return min(instances, key=lambda x: (predicted_ttft(x, r, r.arrival), x.outstanding, x.iid))
    return pick


# ---------------------------------------------------------------------- classes from text, per-class figures
def parse_classes(text: str, label: str = "--slo-classes") -> tuple[SLOClass, ...]:
    """``default`` (`DEFAULT_CLASSES`) or ``NAME:TTFT_S:TPOT_S:SHARE,...`` (tightest first, e.g.
    ``tight:1:0.08:0.2,standard:3:0.15:0.5,relaxed:10:0.3:0.3``; seconds and fractions) -> the classes,
    checked (`check_classes`); a ValueError naming ``label`` and the class otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{label}: expected default or NAME:TTFT_S:TPOT_S:SHARE,..., got {text!r}")
    if text.strip() == "default":
        return DEFAULT_CLASSES
    out = []
    for k, part in enumerate(p.strip() for p in text.split(",")):
        bits = part.split(":")
        if len(bits) != 4 or not bits[0]:
            raise ValueError(f"{label}: class {k} {part!r}: expected NAME:TTFT_S:TPOT_S:SHARE "
                             "(e.g. tight:1:0.08:0.2)")
        try:
            ttft, tpot, share = (float(b) for b in bits[1:])
        except ValueError:
            raise ValueError(f"{label}: class {k} {part!r}: TTFT_S, TPOT_S and SHARE must be numbers "
                             "(seconds, seconds, a fraction)") from None
        out.append(SLOClass(bits[0], ttft, tpot, share))
    try:
        return check_classes(out)
    except ValueError as e:
        raise ValueError(f"{label}: {e}") from None


def class_report(reqs: Sequence["Req"], classes: Sequence[SLOClass], arrival: Sequence[float] | None = None,
                 window_s: float | None = None) -> dict:
    """Per-class figures of a finished run, by class name (tightest first): ``requests``, ``shed``,
    ``attainment`` (0-1: the class's requests with TTFT <= its TTFT target and TPOT <= its TPOT target;
    shed and unserved requests miss), ``met``, ``goodput_rps`` (met per second of ``window_s``, when given)
    and the ``ttft``/``tpot``/``e2e`` statistics of its served requests (s, `metrics.fifteen`). TTFT and
    E2E count from ``arrival`` (one time per request, s; default: each request's workload arrival).
    The ``requests``, ``met`` and ``shed`` of the classes sum to the run's."""
    arr = [r.arrival for r in reqs] if arrival is None else list(arrival)
    out: dict = {}
    for k, c in enumerate(classes):
        idx = [i for i, r in enumerate(reqs) if r.klass == k]
        served = [i for i in idx if not reqs[i].shed and math.isfinite(reqs[i].first)]
        lat = latencies([arr[i] for i in served], [reqs[i].first for i in served], [reqs[i].last for i in served],
                        [reqs[i].output for i in served])
        met = int(((lat["ttft"] <= c.ttft_s) & (lat["tpot"] <= c.tpot_s)).sum())
        row = {"ttft_target_s": c.ttft_s, "tpot_target_s": c.tpot_s, "requests": len(idx),
               "shed": sum(1 for i in idx if reqs[i].shed), "met": met,
               "attainment": met / len(idx) if idx else float("nan")}
        if window_s is not None:
            row["goodput_rps"] = met / window_s if window_s > 0 else float("nan")
        row.update(fifteen(lat))
        out[c.name] = row
    return out
