"""One serving instance: vLLM V1 continuous batching at iteration level (``vllm/v1/core/sched/scheduler.py``).

Each iteration (one forward of the model) is scheduled at the instant the previous one ends:

1. **running first**, in admission order: each request gets ``num_tokens - num_computed_tokens`` new
   tokens (1 for a decode, the rest of a prompt for a prefill), capped by the remaining token budget
   ``max_num_batched_tokens`` (chunked prefill). If its KV blocks cannot be allocated, the *last*
   running request is preempted (blocks freed, ``num_computed_tokens`` reset: recompute), repeatedly,
   until the allocation succeeds or the request preempted itself;
2. **then waiting** (FCFS, only if nothing was preempted this step): admit while budget remains and fewer
   than ``max_num_seqs`` run; a prompt's cached prefix (prefix caching) counts as computed; under
   ``scheduler_reserve_full_isl`` (vLLM 0.19's default) a request is admitted only if its whole prompt
   fits in the free blocks; the first request that does not fit stops admission.

A request produces a token at the end of every iteration after which it has computed all its tokens:
the first at the end of the iteration completing its prompt (its TTFT), then one per decode iteration;
it finishes with its ``output_tokens``-th token. Iteration times come from `IterationModel`.

With ``async_scheduling`` (vLLM V1's default since the batch queue of two, ``EngineCore.step_with_batch_queue``:
"fulfilling the batch queue has a higher priority than getting model outputs"), the scheduler forms step
k+1 as soon as step k is launched, so while the engine runs back to back a request can only join the
step after next: the admission cutoff of an iteration is the start time of the previous one (an engine
with nothing running schedules a new request at once).

Runs of pure-decode iterations with nothing waiting are advanced in one vectorised block (same times as
stepping one by one); anything else is stepped one iteration at a time.

Prompt share of an iteration (for its power, `twin.serving.energy`): 1 for an iteration of prompt tokens
only, 0 for one without prompt tokens, and for a mixed one (chunked prefill: prompt chunks and decodes in
one forward) the part of its modelled time due to its prompt tokens, by the latency model's own
decomposition: ``(t(batch) - t(its decodes alone)) / t(batch)`` clipped to [0, 1] (`prompt_share`).
A decode is a one-token step of a request past its prompt; every other token (a prompt chunk, including
a one-token remainder that `Batch.shape` times as a decode, or a recomputation after a preemption) is
prompt work. An iteration without a chunk of more than one token (``pc = 0``) is a decode iteration.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from .kvcache import BlockManager, cdiv
from .profiles import IterationModel


class Req:
    """A request's serving state (times in seconds on the simulation clock)."""
    __slots__ = ("uid", "arrival", "queued", "prompt", "output", "num_tokens", "computed", "generated",
                 "first", "last", "preemptions", "hashes", "token_ids", "block_ids", "klass", "instance",
                 "transferred", "prefill_instance", "ready", "shed")

    def __init__(self, uid: int, arrival: float, prompt: int, output: int, token_ids=None, block_ids=None,
                 klass: int = 0) -> None:
        self.uid, self.arrival, self.prompt, self.output = uid, arrival, prompt, output
        self.queued = arrival          # when the engine received it (vLLM's queued_ts), set by Instance.add
        self.num_tokens = prompt       # tokens whose KV the request needs (prompt + generated so far)
        self.computed = 0              # tokens whose KV is computed (vLLM num_computed_tokens)
        self.generated = 0
        self.first = self.last = float("nan")
        self.preemptions = 0
        self.hashes: list = []
        self.token_ids, self.block_ids, self.klass = token_ids, block_ids, klass
        self.instance = -1
        self.transferred = 0           # tokens whose KV arrived from a prefill instance (P/D)
        self.prefill_instance = -1
        self.ready = arrival           # when it reached the instance that now holds it
        self.shed = False              # dropped by admission control (``admission="shed"``): never served

    def block_hashes(self, upto_tokens: int, bs: int) -> list:
        """Chained hashes of the request's full blocks up to ``upto_tokens`` (prompt token ids when known;
        Mooncake block ids; else ids unique to the request)."""
        h = self.hashes
        for i in range(len(h), upto_tokens // bs):
            lo, hi = i * bs, (i + 1) * bs
            if hi <= self.prompt and self.token_ids is not None:
                h.append(hash((h[-1] if h else None, tuple(self.token_ids[lo:hi]))))
            elif hi <= self.prompt and self.block_ids is not None and hi <= 512 * len(self.block_ids):
                h.append(("m", self.block_ids[lo // 512], (lo % 512) // bs))
            else:
                h.append(("r", self.uid, i))
        return h


class Batch:
    """One iteration's schedule: (request, new tokens, computed before) and its shape for the timing model."""
    __slots__ = ("sched", "tokens", "pc", "kvp", "nd", "kvd_sum", "kmax", "kmin")

    def __init__(self, sched: list) -> None:
        self.sched = sched
        tokens = pc = kvp = nd = kvd_sum = kmax = 0
        kmin = 1 << 62
        for _, n, before in sched:
            tokens += n
            if n > 1:
                pc += n
                kvp += before
            else:
                nd += 1
                kvd_sum += before
                if before > kmax:
                    kmax = before
                if before < kmin:
                    kmin = before
        self.tokens, self.pc, self.kvp, self.nd, self.kvd_sum, self.kmax, self.kmin = \
            tokens, pc, kvp, nd, kvd_sum, kmax, kmin

    def shape(self) -> tuple[int, int, int, int, int, int, int, int]:
        """(tokens, sequences, prefill tokens, their KV, decodes, mean decode KV, max, min)."""
        nd = self.nd
        return (self.tokens, len(self.sched), self.pc, self.kvp, nd, (self.kvd_sum // nd) if nd else 0,
                self.kmax, self.kmin if nd else 0)


def prompt_share(model, b: Batch, t_model: float | None = None) -> float:
    """Part of a mixed iteration's modelled time due to its prompt tokens, in [0, 1]:
    ``(t_model - t_dec) / t_model`` with ``t_dec`` the same model's time of the batch's decodes alone
    (its one-token sequences past their prompt, at their mean / longest / shortest context) and
    ``t_model`` the batch's own time (``model.iteration_s(*b.shape())`` when not given). For the per-layer
    profiles this is the extra dense/MoE/all-reduce work of the prompt tokens, the attention of the prompt
    chunks and the ``lm_head``/sampler rows of their sequences; for Splitwise's table ``1 - token(nd) /
    (1.1 prompt(pc + nd))``; for DistServe's ``prefill(pc) / (prefill(pc) + decode)``.

    A one-token chunk of a prompt (a remainder cut by the token budget) is timed as a decode by
    `Batch.shape` but is prompt work: it is left out of the decodes here (so a prefill instance, which has
    no decodes, always gets 1). A member of a DP group (`dpgroup.DPGroup`, whose step lasts the group's
    padded maximum) uses its own unpadded times. Cost: one more ``iteration_s`` call and one pass over
    the batch per mixed iteration (the token-parallel part is cached by token count)."""
    nd, ksum, kmax, kmin = b.nd, b.kvd_sum, b.kmax, b.kmin
    for r, n, before in b.sched:
        if n == 1 and (not r.generated or before + 1 < r.num_tokens):   # a one-token prompt chunk
            dec = [c for q, k, c in b.sched if k == 1 and q.generated and c + 1 == q.num_tokens]
            if not dec:
                return 1.0
            nd, ksum, kmax, kmin = len(dec), sum(dec), max(dec), min(dec)
            break
    t_dec = model.iteration_s(nd, nd, 0, 0, nd, ksum // nd, kmax, kmin)
    if t_model is None:
        t_model = model.iteration_s(*b.shape())
    if not t_model > 0.0:
        return 1.0
    s = (t_model - t_dec) / t_model
    return 0.0 if s < 0.0 else (1.0 if s > 1.0 else s)


class Instance:
    """A vLLM engine on ``tp`` GPUs: waiting queue, running set, KV blocks, and its own clock ``t``."""

    def __init__(self, iid: int, model: IterationModel, kv: BlockManager, max_num_seqs: int = 256,
                 max_num_batched_tokens: int = 2048, chunked_prefill: bool = True,
                 reserve_full_isl: bool = True, long_prefill_token_threshold: int = 0,
                 async_scheduling: bool = False, role: str = "both", policy: str = "fcfs",
                 slo=None, admission: str = "none") -> None:
        self.iid, self.model, self.kv = iid, model, kv
        self.max_num_seqs, self.budget = int(max_num_seqs), int(max_num_batched_tokens)
        self.chunked, self.reserve_full_isl = chunked_prefill, reserve_full_isl
        self.long_threshold = int(long_prefill_token_threshold)
        self.async_scheduling = bool(async_scheduling)
        if role not in ("both", "prefill", "decode"):
            raise ValueError(f"instance role must be both, prefill or decode, got {role!r}")
        self.role = role
        if policy not in ("fcfs", "priority", "slack"):
            raise ValueError("scheduling policy must be fcfs or priority, or slack (twin.serving.slo), "
                             f"got {policy!r}")
        if admission not in ("none", "defer", "shed"):
            raise ValueError(f"admission control must be none, defer or shed, got {admission!r}")
        if admission != "none" and policy != "slack":
            raise ValueError(f"admission {admission!r} needs policy 'slack' (it uses the deadline slack), "
                             f"got policy {policy!r}")
        #: vLLM's ``policy="priority"``: waiting ordered by (class, arrival), lower class first; preemption
        #: takes the lowest-priority running request (HyperFlexis-style multi-SLO classes use it)
        self.priority = policy == "priority"
        #: ``policy="slack"`` (`twin.serving.slo`): waiting and running ordered by deadline slack from this
        #: instance's own latency model; preemption takes the running request with the most slack
        self.slo = None                # the SLO classes of a slack policy (`slo.SlackPolicy`)
        self.slack = None
        if policy == "slack":
            from .slo import SlackPolicy  # noqa: PLC0415 (slo imports this module)
            self.slack = SlackPolicy(self, slo, admission)
        #: the waiting queue is not FCFS: admission may pick a request behind the head
        self.reorder = policy != "fcfs"
        #: requests dropped by admission control (``admission="shed"``): reported, never served
        self.shed: list[Req] = []
        #: (time, request) of prompts this prefill instance finished, to hand to a decode instance
        self.handoffs: list[tuple[float, "Req"]] = []
        self.prefill_busy_s = 0.0      # iterations with prompt tokens (s)
        #: busy time weighted by each iteration's prompt share (`prompt_share`), s: the prefill-power part
        #: of ``busy_s`` (equal to ``prefill_busy_s`` when no iteration mixes prompt chunks and decodes)
        self.prompt_busy_s = 0.0
        self._last_start = self._last_end = float("-inf")
        self._cutoff = 0.0
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.t = 0.0
        self.busy_s = 0.0
        self.iterations = 0
        self.preemptions = 0
        self.tokens_prefilled = 0
        self.tokens_decoded = 0
        self.finished: list[Req] = []
        #: requests that finished in the step just completed whose slot and KV blocks the scheduler still
        #: holds while it forms the next step (async scheduling, see `form_batch`)
        self._finishing: list[Req] = []
        self.outstanding = 0
        self.inbound = 0               # KV transfers to this instance in flight (P/D on a topology)
        self.series: list[tuple[float, int, int, int, int]] | None = None  # (t, running, waiting, kv_used, tokens)
        #: optional observer of busy time: ``busy_hook(start s, end s, share)`` for every iteration (or
        #: vectorised run of decode iterations, share 0) once scheduled, ``share`` its prompt share in [0, 1]
        #: (`prompt_share`; `twin.serving.power_feed`)
        self.busy_hook = None

    # ---- arrivals ----------------------------------------------------------------------------
    def add(self, r: Req, now: float) -> None:
        """A request reaches the engine at ``now``; an idle engine's clock jumps to it."""
        if cdiv(r.prompt + 1, self.kv.block_size) > self.kv.num_blocks:
            raise ValueError(f"request {r.uid}: {r.prompt} prompt tokens need more KV blocks than the instance "
                             f"has ({self.kv.num_blocks} blocks of {self.kv.block_size}); vLLM would refuse it "
                             "(max_model_len). Use a larger GPU, more TP, or filter the trace")
        r.instance = self.iid
        if not self.running and not self.waiting:
            self.t = max(self.t, now)
        # the engine core reads its input queue between steps: a request reaching a busy engine is
        # received (vLLM's queued_ts) when the step in flight ends
        r.queued = max(now, self.t)
        r.ready = now
        self._enqueue(r)
        self.outstanding += 1

    def add_transferred(self, r: Req, now: float, expected: bool = False) -> None:
        """A request whose prompt KV (``r.computed`` tokens) arrives from a prefill instance at ``now``;
        ``expected``: already counted outstanding by `expect_transfer` when its transfer started."""
        r.transferred = r.computed
        r.instance = self.iid
        r.ready = now
        if not self.running and not self.waiting:
            self.t = max(self.t, now)
        self._enqueue(r)
        if expected:
            self.inbound -= 1
        else:
            self.outstanding += 1

    def expect_transfer(self) -> None:
        """A KV transfer to this instance has started (P/D on a topology): the request counts as
        outstanding (routed, unfinished) from now, and as ``inbound`` until its KV arrives."""
        self.outstanding += 1
        self.inbound += 1

    def _enqueue(self, r: Req) -> None:
        if not self.priority:
            self.waiting.append(r)
            return
        key = (r.klass, r.arrival, r.uid)
        for k, q in enumerate(self.waiting):
            if (q.klass, q.arrival, q.uid) > key:
                self.waiting.insert(k, r)
                return
        self.waiting.append(r)

    def idle(self) -> bool:
        return not self.running and not self.waiting

    # ---- time advance -----------------------------------------------------------------------
    def advance_until(self, t_limit: float) -> None:
        """Run every iteration that starts before ``t_limit`` (its effects land at its end)."""
        while self.t < t_limit and (self.running or self.waiting):
            if not self.waiting and self.running and self._decode_run(t_limit):
                continue
            if not self._step():          # blocked by KV blocks reserved for transfers in flight (P/D):
                if t_limit != float("inf"):   # idle until the next event (a landing frees them)
                    self.t = t_limit
                break

    def drain(self) -> None:
        self.advance_until(float("inf"))

    # ---- scheduling ---------------------------------------------------------------------------
    def _schedule(self) -> list[tuple[Req, int, int]]:
        kv, bs, caching = self.kv, self.kv.block_size, self.kv.caching
        budget = self.budget
        out: list[tuple[Req, int, int]] = []
        preempted = False
        if self.slack is not None:
            self.slack.order(self.t)
            budget = self.slack.budget(self.t)
        running = self.running
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            n = r.num_tokens - r.computed
            if 0 < self.long_threshold < n:
                n = self.long_threshold
            n = min(n, budget)
            if n <= 0:
                i += 1
                continue
            ok = False
            while True:
                total = r.computed + n
                hashes = r.block_hashes(min(total, r.num_tokens), bs) if caching else None
                if kv.allocate(r.uid, total, hashes=hashes, cache_upto=min(total, r.num_tokens)):
                    ok = True
                    break
                if self.priority or self.slack is not None:
                    # vLLM V1 priority policy: the lowest-priority (largest value), latest-arriving runs;
                    # slack: the running request with the most deadline slack (recomputed, as vLLM V1 does)
                    victim = (max(running, key=lambda q: (q.klass, q.arrival)) if self.priority
                              else self.slack.victim(running, self.t))
                    vi = running.index(victim)
                    running.pop(vi)
                    if vi < i:  # already scheduled this step: give its tokens back
                        j = next(k for k, e in enumerate(out) if e[0] is victim)
                        budget += out.pop(j)[1]
                        i -= 1
                else:
                    victim = running.pop()
                self._preempt(victim)
                preempted = True
                if victim is r:
                    break
            if not ok:
                break
            out.append((r, n, r.computed))
            budget -= n
            i += 1
        if not preempted:
            budget = self._admit(out, budget)
        return out

    def _admit(self, out: list, budget: int) -> int:
        kv, bs, caching = self.kv, self.kv.block_size, self.kv.caching
        while self.waiting and budget > 0 and len(self.running) + len(self._finishing) < self.max_num_seqs:
            r = self.waiting[0]
            if r.ready > self._cutoff:
                if not self.reorder:
                    break
                r = next((q for q in self.waiting if q.ready <= self._cutoff), None)
                if r is None:
                    break
            hit: list[int] = []
            hashes = None
            if caching:
                hashes = r.block_hashes(r.num_tokens, bs)
                hit = kv.computed_blocks(hashes, r.num_tokens)
            computed = max(len(hit) * bs, r.transferred)
            n = r.num_tokens - computed
            if 0 < self.long_threshold < n:
                n = self.long_threshold
            if not self.chunked and n > budget:
                break
            n = min(n, budget)
            if self.reserve_full_isl and not kv.can_fit(r.uid, r.num_tokens, hit):
                break
            if not kv.allocate(r.uid, computed + n, hit=hit, hashes=hashes, cache_upto=computed + n):
                break
            if self.waiting[0] is r:
                self.waiting.popleft()
            else:
                self.waiting.remove(r)
            r.computed = computed
            self.running.append(r)
            out.append((r, n, computed))
            budget -= n
        return budget

    def _preempt(self, r: Req) -> None:
        self.kv.release(r.uid)
        r.computed = 0
        r.transferred = 0  # recomputed here
        r.preemptions += 1
        self.preemptions += 1
        if self.priority:
            self._enqueue(r)
        else:
            self.waiting.appendleft(r)     # slack: re-ordered at the next step

    # ---- one iteration ------------------------------------------------------------------------
    def _step(self) -> bool:
        b = self.form_batch()
        if b is None:
            return False
        dt = self.model.iteration_s(*b.shape())
        self.complete(b, self.t + dt, dt)
        return True

    def form_batch(self) -> "Batch | None":
        """Schedule the next iteration (advancing ``num_computed_tokens``); None when nothing can run."""
        # async scheduling (vLLM V1 batch queue of 2): while the engine runs back to back, the step that
        # starts now was formed when the previous one started, so only requests that had arrived by then
        # can join it; an engine with nothing running schedules at once
        back_to_back = self.async_scheduling and self.running and self.t == self._last_end
        if back_to_back:
            self._cutoff = self._last_start
        else:
            self._cutoff = self.t
            if self._finishing:
                self._release_finishing()
        self._last_start = self.t
        sched = self._schedule()
        # the step formed now was scheduled before the previous step's outputs were processed
        # (EngineCore.step_with_batch_queue: schedule + launch step k+1, then block on step k's result and
        # Scheduler.update_from_output, which frees finished requests' KV blocks and running slots): so the
        # requests that finished in step k still held their max_num_seqs slot and KV blocks for it
        if self._finishing:
            self._release_finishing()
        if not sched:
            if (self.running or self.waiting) and self.inbound > 0:
                return None   # P/D: the free blocks are reserved for KV transfers in flight (`pd.reserve_kv`)
            if self.running or self.waiting:
                head = self.waiting[0] if self.waiting else self.running[0]
                raise RuntimeError(f"instance {self.iid}: nothing schedulable at t={self.t:.6f} s but request "
                                   f"{head.uid} is pending ({head.num_tokens} tokens, {self.kv.free} of "
                                   f"{self.kv.num_blocks} KV blocks free)")
            return None
        b = Batch(sched)
        for r, n, before in sched:
            r.computed = before + n
        return b

    def complete(self, b: "Batch", end: float, t_model: float | None = None) -> None:
        """Apply an iteration's results at its end time ``end``: tokens, first/last times, finishes.
        ``t_model``: the batch's modelled time (s) when already known (for `prompt_share`)."""
        self.busy_s += end - self.t
        share = 0.0
        if b.pc:
            self.prefill_busy_s += end - self.t
            if b.nd:
                share = prompt_share(self.model, b, t_model)
                self.prompt_busy_s += share * (end - self.t)
            else:
                share = 1.0
                self.prompt_busy_s += end - self.t
        if self.busy_hook is not None:
            self.busy_hook(self.t, end, share)
        self.iterations += 1
        self.tokens_prefilled += b.pc
        done = []
        handoff = []
        for r, n, _ in b.sched:
            if r.computed >= r.num_tokens:
                r.generated += 1
                self.tokens_decoded += 1
                if r.generated == 1:
                    r.first = end
                r.last = end
                if r.generated >= r.output:
                    done.append(r)
                else:
                    r.num_tokens += 1
                    if self.role == "prefill" and r.generated == 1:
                        handoff.append(r)
        for r in done:
            self._finish(r)
        for r in handoff:  # P/D: the prompt is done here; its KV goes to a decode instance
            self.kv.release(r.uid)
            self.running.remove(r)
            self.outstanding -= 1
            r.prefill_instance = self.iid
            self.handoffs.append((end, r))
        if self.series is not None:
            self.series.append((end, len(self.running), len(self.waiting), self.kv.used, b.tokens))
        self.t = self._last_end = end

    def _finish(self, r: Req) -> None:
        self.running.remove(r)
        self.finished.append(r)
        self.outstanding -= 1
        if self.async_scheduling and (self.running or self.waiting):
            self._finishing.append(r)  # released once the next step is formed (`form_batch`)
        else:
            self.kv.release(r.uid)
        if self._finishing and not self.running and not self.waiting:
            self._release_finishing()  # the engine idles: its next step is formed with everything freed

    def _release_finishing(self) -> None:
        for r in self._finishing:
            self.kv.release(r.uid)
        self._finishing.clear()

    # ---- vectorised pure-decode runs ----------------------------------------------------------
    def _decode_run(self, t_limit: float) -> bool:
        """Advance a run of identical pure-decode iterations at once; False if the state does not allow it."""
        run = self.running
        n = len(run)
        if n > self.budget or n < 1 or self.role == "prefill":
            return False
        for r in run:
            if r.num_tokens - r.computed != 1:
                return False
        steps = min(r.output - r.generated for r in run)
        if steps < 2:
            return False
        if self._finishing:  # nothing waits for their slots; their blocks are free from the run's 2nd step
            self._release_finishing()
        bs, kv = self.kv.block_size, self.kv
        # KV blocks for all `steps` iterations must be free now (else step one at a time and preempt)
        need = sum(cdiv(r.computed + steps, bs) for r in run) - sum(kv.held(r.uid) for r in run)
        if need > kv.free:
            return False
        kvd0 = sum(r.computed for r in run) // n
        kvmax0 = max(r.computed for r in run)
        closed = self.model.decode_run(self.t, t_limit, n, kvd0, steps, kvmax0)
        if closed is not None:
            k, last_start, end = closed
            if k < 2:
                return False
            first_end = None
        else:
            dts = self.model.decode_run_s(n, kvd0, steps, kvmax0)
            ends = self.t + np.cumsum(dts)
            # iterations start at t, ends[0], ends[1], ...: keep those starting before t_limit
            k = min(steps, 1 + int(np.searchsorted(ends, t_limit, side="left")))
            if k < 2:
                return False
            end, last_start, first_end = float(ends[k - 1]), float(ends[k - 2]), float(ends[0])
        for r in run:
            if r.generated == 0:  # its prompt's last token ran as a 1-token step: that is its first token
                if first_end is None:
                    first_end = self.t + float(self.model.decode_run_s(n, kvd0, 1, kvmax0)[0])
                r.first = first_end
            total = r.computed + k
            kv.allocate(r.uid, total, hashes=r.block_hashes(total, bs) if kv.caching else None, cache_upto=total)
            r.computed = total
            r.generated += k
            r.num_tokens += k
            r.last = end
        self._last_start = last_start
        self._last_end = end
        self.busy_s += end - self.t
        if self.busy_hook is not None:
            self.busy_hook(self.t, end, 0.0)
        self.iterations += k
        self.tokens_decoded += k * n
        done = [r for r in run if r.generated >= r.output]
        for r in done:
            r.num_tokens -= 1  # the last token's KV is never needed
            self._finish(r)
        if self.series is not None:
            self.series.append((end, len(self.running), len(self.waiting), kv.used, n))
        self.t = end
        return True
