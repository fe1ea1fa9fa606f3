"""Power of a mixed (chunked-prefill) iteration: the prompt-share blend of `twin.serving.energy`.

A mixed iteration draws ``s P_prefill + (1 - s) P_decode`` per GPU over its duration, ``s`` =
(t(batch) - t(its decodes alone)) / t(batch) from the latency model (`instance.prompt_share`). Checked
by hand with a linear engine, t = A + BP x prompt tokens + BD x decodes (s), on H100 phase power
(Splitwise: idle 75, prompt 700, token 380 W per GPU): the standalone energy (`energy.instance_energy`),
the batch model's ``serving.energy_j`` and the facility feed (`power_feed`) all give the same joules.
"""
from __future__ import annotations

import numpy as np
import pytest

from hpctwin.twin.serving.energy import SPLITWISE_POWER, PhasePower, blend_w, instance_energy
from hpctwin.twin.serving.instance import Batch, Instance, Req, prompt_share
from hpctwin.twin.serving.kvcache import BlockManager

from .test_serving_batch_pd import MB_SHAPE
from .test_serving_power import run

A, BP, BD = 0.01, 0.001, 0.0005      # s: per iteration, per prompt token, per decode
H100 = SPLITWISE_POWER["h100-80gb"]  # 75 / 700 / 380 W


class LinearModel:
    """Iteration time A + BP pc + BD nd (s): the prompt part of a mixed step is exactly BP pc."""
    tp = 1
    shape = None

    def iteration_s(self, tokens, seqs, pc, kvp, nd, kvd, kvd_max=0, kvd_min=0) -> float:
        return A + BP * pc + BD * nd

    def decode_run(self, *a):
        return None

    def decode_run_s(self, nd, kvd0, steps, kvmax0=0):
        return np.full(steps, A + BD * nd)


def make_linear(iid: int) -> Instance:
    return Instance(iid, LinearModel(), BlockManager(10_000, 16), max_num_seqs=256, max_num_batched_tokens=2048)


def _by_hand_instance():
    """r1 (10 prompt, 5 output) at 0, r2 (20 prompt, 2 output) at 0.025 s. Iterations, by hand:
    [0, 0.02] r1's prompt (pure prompt); [0.02, 0.0305] r1 decodes (pure decode; r2 arrives meanwhile);
    [0.0305, 0.061] r1 decode + r2's 20-token prompt (mixed: 0.0305 s, decode-only 0.0105 s, share
    0.02 / 0.0305 = 40/61); [0.061, 0.072] two decodes (r2 done); [0.072, 0.0825] r1's last decode."""
    x = make_linear(0)
    shares = []
    x.busy_hook = lambda s, e, sh: shares.append((s, e, sh))
    x.add(Req(1, 0.0, 10, 5), 0.0)
    x.advance_until(0.025)
    x.add(Req(2, 0.025, 20, 2), 0.025)
    x.drain()
    return x, shares


def test_mixed_step_energy_by_hand_standalone():
    x, shares = _by_hand_instance()
    got = [(round(s, 9), round(e, 9), sh) for s, e, sh in shares]
    assert [g[:2] for g in got] == [(0.0, 0.02), (0.02, 0.0305), (0.0305, 0.061), (0.061, 0.072), (0.072, 0.0825)]
    assert [g[2] for g in got[:2] + got[3:]] == [1.0, 0.0, 0.0, 0.0]     # pure steps: exactly 1 and 0
    assert got[2][2] == pytest.approx(40 / 61, rel=1e-12)
    assert x.prefill_busy_s == pytest.approx(0.0505)     # time of iterations with prompt tokens (timing view)
    assert x.prompt_busy_s == pytest.approx(0.04, rel=1e-12)           # 0.02 pure + 0.02 of the mixed step
    span = 0.1
    e = instance_energy(x, span, H100)
    # the mixed step: its prompt part (0.02 s) at 700 W and its decode part (0.0105 s) at 380 W
    assert e["energy_j"] == pytest.approx(700.0 * 0.04 + 380.0 * 0.0425 + 75.0 * (span - 0.0825), rel=1e-12)
    assert e["prefill_s"] == pytest.approx(0.04, rel=1e-12) and e["decode_s"] == pytest.approx(0.0425, rel=1e-12)
    # before: the whole mixed step at prefill power (1.36 J more here)
    old = 700.0 * 0.0505 + 380.0 * 0.032 + 75.0 * (span - 0.0825)
    assert old - e["energy_j"] == pytest.approx((700.0 - 380.0) * 0.0105, rel=1e-9)


def test_blend_and_share_rules():
    p = PhasePower(10.0, 100.0, 50.0)
    assert (blend_w(p, 1.0), blend_w(p, 0.0), blend_w(p, 0.25)) == (100.0, 50.0, 62.5)
    m = LinearModel()
    b = Batch([])
    b.tokens, b.pc, b.nd, b.kvd_sum, b.kmax, b.kmin = 101, 100, 1, 7, 7, 7
    assert prompt_share(m, b) == pytest.approx(0.1 / (A + 0.1 + BD), rel=1e-12)
    assert prompt_share(m, b, A + 0.1 + BD) == prompt_share(m, b)      # t_model given or computed
    assert prompt_share(m, b, 0.005) == 0.0                            # clipped: shorter than its decodes
    assert prompt_share(m, b, 0.0) == 1.0                              # degenerate time: all prompt


def _batch(entries):
    """A Batch of (request, new tokens, computed before) as `Instance.form_batch` fills it."""
    return Batch(list(entries))


def test_one_token_prompt_chunk_counts_as_prompt_work():
    m = LinearModel()
    tail = Req(1, 0.0, 10, 5)                   # its prompt's last token alone (cut by the token budget)
    tail.num_tokens = 10
    dec = Req(2, 0.0, 17, 9)                    # a decode: 3 tokens generated, 19 of 20 computed
    dec.generated, dec.num_tokens = 3, 20
    chunk = Req(3, 0.0, 500, 5)                 # a 50-token prompt chunk
    b = _batch([(tail, 1, 9), (dec, 1, 19), (chunk, 50, 100)])
    assert b.nd == 2                            # timed as two decodes ...
    t = A + BP * 50 + BD * 2
    assert prompt_share(m, b) == pytest.approx((t - (A + BD)) / t, rel=1e-12)   # ... one of them is prompt
    # a prefill instance's step (prompt chunks only, one of them one token): all prompt
    assert prompt_share(m, _batch([(tail, 1, 9), (chunk, 50, 100)])) == 1.0
    # a recomputation after a preemption (tokens generated, not all computed) is prompt work too
    re = Req(4, 0.0, 30, 9)
    re.generated, re.num_tokens = 2, 32
    assert prompt_share(m, _batch([(re, 1, 7), (chunk, 50, 100)])) == 1.0


def test_mixed_step_in_batch_run_energy_and_feed_by_hand():
    # the instance starts at 10 and is ready at 15; r1 (trace 0 = log 10: 10 prompt, 5 output) runs
    # from 15, r2 (trace 5.025 = log 15.025: 20 prompt, 2 output) joins at 15.0305 as in the standalone case, shifted by 15 s;
    # released at the tick at 25. GPU energy over its life [10, 25], by hand
    reqs = [(0.0, 10, 5), (5.025, 20, 2)]
    m, pm, res = run([(0, 1, 5, 5)], reqs, make=make_linear)
    i = m.insts[0]
    assert (i.t0, i.ready, i.t_end) == (10.0, 15.0, 25.0)
    assert i.x.prompt_busy_s == pytest.approx(0.04, rel=1e-12)
    gpu = 700.0 * 0.04 + 380.0 * 0.0425 + 75.0 * (15.0 - 0.0825)
    assert m.summary()["serving"]["energy_j"] == pytest.approx(gpu, rel=1e-12)
    # conservation: the feed's GPU energy (node energy minus CPU idle, memory, NICs) = serving.energy_j
    e = pm.job_columns()["energy_j"]
    assert e[1] - 20.0 * 15.0 == pytest.approx(gpu, rel=1e-12)
    # the same without the power model: timing identical, same serving energy
    m0, _, _ = run([(0, 1, 5, 5)], reqs, power=False, make=make_linear)
    assert [(q.first, q.last) for q in m0.reqs] == [(q.first, q.last) for q in m.reqs]
    assert m0.summary()["serving"]["energy_j"] == m.summary()["serving"]["energy_j"]


def test_busy_mixed_instance_feed_equals_energy_j():
    # 300 requests over 600 s on the linear engine: thousands of mixed steps of many shares
    rng = np.random.default_rng(1)
    reqs = [(float(t), int(rng.integers(5, 3000)), int(rng.integers(1, 200))) for t in np.sort(rng.uniform(0, 600, 300))]
    m, pm, res = run([(0, 1, 700, 800)], reqs, make=make_linear)
    x = m.insts[0].x
    assert 0.0 < x.prompt_busy_s < x.prefill_busy_s      # mixed steps blended, below the old all-prefill
    e = pm.job_columns()["energy_j"]
    rows = [j for j in range(len(e)) if j >= 1 and not np.isnan(e[j])]
    other = 20.0 * sum(i.t_end - i.t0 for i in m.insts)
    assert sum(e[j] for j in rows) == pytest.approx(m.summary()["serving"]["energy_j"] + other, rel=1e-9)


class LinearPDModel(LinearModel):
    """`LinearModel` with test_serving_batch_pd's 1 MB of KV per token (for the P/D hand-off)."""
    shape = MB_SHAPE


def make_linear_pd(iid: int) -> Instance:
    return Instance(iid, LinearPDModel(), BlockManager(10_000, 16), max_num_seqs=256, max_num_batched_tokens=2048)


def test_pd_pools_have_no_mixed_steps_and_keep_their_energy():
    from .test_serving_power_pd import OTHER, run_pd_power
    rng = np.random.default_rng(1)
    reqs = [(float(t), int(rng.integers(5, 2000)), int(rng.integers(1, 150)))
            for t in np.sort(rng.uniform(0, 300, 200))]
    m, pm = run_pd_power([(0, 1, 400, 500)], reqs, make=make_linear_pd)
    for i in m.insts:
        # a prefill instance runs prompt steps only, a decode instance decode steps only (no preemption
        # here): the prompt-share seconds are the prompt-iteration seconds, bit for bit
        assert i.x.prompt_busy_s == i.x.prefill_busy_s, i.pool
        assert (i.x.prefill_busy_s > 0) == (i.pool == "prefill")
    # so serving.energy_j is the pre-blend formula's, bit for bit
    old = 0.0
    for i in m.insts:
        p = m.pools[i.pool].power
        life = i.t_end - i.t0
        busy = min(i.x.busy_s, life)
        pre = min(i.x.prefill_busy_s, busy)
        old += i.x.model.tp * (p.prefill_w * pre + p.decode_w * (busy - pre) + p.idle_w * (life - busy))
    assert m.summary()["serving"]["energy_j"] == old
    e = pm.job_columns()["energy_j"]
    other = OTHER * sum(i.t_end - i.t0 for i in m.insts)
    assert sum(e[j] for j in sorted(i.job for i in m.insts)) == pytest.approx(old + other, rel=1e-9)
