"""Tests of the Lublin-Feitelson generator and the Tsafrir estimate model (datasets/synthetic.py).

Statistical checks compare large samples with expectations derived analytically from the
model's own parameters, with tolerances of roughly 4 standard errors or more (stated at
each assertion). Every sample has a fixed seed, so each run gives the same result.
"""
from __future__ import annotations

import gzip
import math
import os
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

from hpctwin.datasets import synthetic as syn
from hpctwin.datasets.synthetic import (BATCH, INTERACTIVE, TYPELESS, SyntheticSpecError, lublin_workload,
                                offered_load, parse_synthetic_spec, tsafrir_estimates)

NODES = 256


@pytest.fixture(scope="module")
def big() -> "syn.Workload":
    """200,000 typeless jobs on 256 nodes (about 0.15 s)."""
    return lublin_workload(jobs=200_000, nodes=NODES, seed=11)


# ----------------------------------------------------------------------------- helpers
def _is_pow2(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.int64)
    return (x & (x - 1)) == 0


def _two_stage_prob(cls, nodes, a: float, b: float) -> float:
    """P(a <= par < b) for the two-stage uniform of class ``cls`` on ``nodes`` (log2 space)."""
    ulow, umed, uhi = syn.size_bounds(cls, nodes)

    def piece(lo, hi, mass):
        if hi <= lo:
            return 0.0
        return mass * max(0.0, min(b, hi) - max(a, lo)) / (hi - lo)

    return piece(ulow, umed, cls.uprob) + piece(umed, uhi, 1 - cls.uprob)


def _expected_pow2_among_parallel(cls, nodes) -> float:
    """Analytic P(size is a power of two | size > 1).

    Rounded branch: always a power of two. Unrounded branch: size = floor(2**par + 0.5) = v
    for par in [log2(v - 0.5), log2(v + 0.5)).
    """
    par = 1 - cls.serial_prob
    q = sum(_two_stage_prob(cls, nodes, math.log2(v - 0.5), math.log2(v + 0.5))
            for v in (2 ** k for k in range(1, int(math.log2(nodes)) + 1)))
    return (cls.pow2_prob + (par - cls.pow2_prob) * q) / par


def _truncated_exp_gamma_mean(cls) -> float:
    """E[exp(G) | G <= 13], G ~ gamma(AARR*ARAR, BARR): the mean inter-arrival [s]."""
    d = stats.gamma(cls.arrival_shape, scale=cls.barr)
    num = integrate.quad(lambda g: math.exp(g) * d.pdf(g), 0, syn.TOO_MUCH_ARRIVE_TIME, limit=200)[0]
    return num / d.cdf(syn.TOO_MUCH_ARRIVE_TIME)


def _truncated_exp_gamma_sd(cls) -> float:
    d = stats.gamma(cls.arrival_shape, scale=cls.barr)
    z = d.cdf(syn.TOO_MUCH_ARRIVE_TIME)
    m2 = integrate.quad(lambda g: math.exp(2 * g) * d.pdf(g), 0, syn.TOO_MUCH_ARRIVE_TIME, limit=200)[0] / z
    return math.sqrt(m2 - _truncated_exp_gamma_mean(cls) ** 2)


def _c_calc_next_arrive(xs, weights, start_bucket=0):
    """Literal Python port of m_lublin99.c's calc_next_arrive loop (without unsigned-long truncation)."""
    points = reminder = 0.0
    bucket, t, out = start_bucket, 0.0, []
    for x in xs:
        points += x / syn.SECONDS_IN_BUCKET
        nxt = 0.0
        while points > weights[bucket]:
            points -= weights[bucket]
            bucket = (bucket + 1) % 48
            nxt += syn.SECONDS_IN_BUCKET
        new_rem = points / weights[bucket]
        nxt += syn.SECONDS_IN_BUCKET * (new_rem - reminder)
        reminder = new_rem
        t += nxt
        out.append(t)
    return np.array(out)


# ----------------------------------------------------------------------------- shape & invariants
def test_workload_shape_and_invariants():
    w = lublin_workload(jobs=3000, nodes=NODES, seed=5)
    assert len(w) == 3000
    np.testing.assert_array_equal(w.job_id, np.arange(1, 3001))
    assert w.submit[0] == 0.0
    assert np.all(np.diff(w.submit) >= 0)
    assert np.all(w.submit == np.floor(w.submit))
    assert np.all(w.runtime >= 1) and np.all(w.runtime == np.floor(w.runtime))
    assert w.runtime.max() <= math.exp(syn.TOO_MUCH_TIME)
    assert w.procs.min() >= 1 and w.procs.max() <= NODES
    assert np.all(w.requested_time >= w.runtime)
    assert w.requested_time.max() <= syn.LUBLIN_MAX_ESTIMATE
    assert np.all(w.queue == -1) and np.all(w.status == 1)
    assert w.machine_size == NODES
    assert w.machine_size_source == "synthetic model"
    assert w.name == "lublin(jobs=3000,nodes=256,seed=5,load=None)"
    assert w.source == "synthetic:jobs=3000,nodes=256,seed=5"
    text = " ".join(w.notes)
    assert "Lublin & Feitelson" in text and "m_lublin99.c" in text and "Tsafrir" in text
    assert "UHI=8" in text and "UMED=5.5" in text and "SERIAL_PROB=0.244" in text
    assert w.sorted() is w  # already in (submit, job_id) order


def test_name_with_load_and_interactive():
    w = lublin_workload(jobs=500, nodes=64, seed=2, load=0.7, interactive=True)
    assert w.name == "lublin(jobs=500,nodes=64,seed=2,load=0.7,interactive=True)"
    assert parse_synthetic_spec(w.source) == {"jobs": 500, "nodes": 64, "seed": 2, "load": 0.7,
                                              "interactive": True}


def test_determinism_same_seed_identical_different_seed_differs():
    cols = ("submit", "runtime", "procs", "requested_time", "queue")
    for kw in ({}, {"interactive": True}, {"load": 0.9}):
        a = lublin_workload(jobs=4000, nodes=128, seed=42, **kw)
        b = lublin_workload(jobs=4000, nodes=128, seed=42, **kw)
        c = lublin_workload(jobs=4000, nodes=128, seed=43, **kw)
        for col in cols:
            assert np.array_equal(getattr(a, col), getattr(b, col)), col
        for col in ("submit", "runtime", "procs", "requested_time"):
            assert not np.array_equal(getattr(a, col), getattr(c, col)), col
        assert a.notes == b.notes


# ----------------------------------------------------------------------------- sizes
def test_serial_fraction_matches_serial_prob(big):
    n = len(big)
    se = math.sqrt(TYPELESS.serial_prob * (1 - TYPELESS.serial_prob) / n)
    assert abs(np.mean(big.procs == 1) - TYPELESS.serial_prob) < 4 * se


def test_pow2_fraction_among_parallel_matches_model(big):
    par = big.procs[big.procs > 1]
    expected = _expected_pow2_among_parallel(TYPELESS, NODES)
    # POW2_PROB/(1-SERIAL_PROB) = 0.762 are rounded; unrounded sizes that land on 2^k add to it
    assert expected > TYPELESS.pow2_prob / (1 - TYPELESS.serial_prob)
    se = math.sqrt(expected * (1 - expected) / len(par))
    assert abs(np.mean(_is_pow2(par)) - expected) < 4 * se


def test_log2_size_mass_split_matches_uprob(big):
    """P(log2 size <= UMED | parallel): UPROB for rounded jobs, UPROB + a sliver for unrounded ones."""
    ulow, umed, uhi = syn.size_bounds(TYPELESS, NODES)
    assert (ulow, umed, uhi) == (0.8, 5.5, 8.0)
    par = big.procs[big.procs > 1]
    limit = math.floor(2 ** umed)                       # 45
    p_round = TYPELESS.pow2_prob / (1 - TYPELESS.serial_prob)
    p_unrounded = _two_stage_prob(TYPELESS, NODES, ulow, math.log2(limit + 0.5))
    expected = p_round * TYPELESS.uprob + (1 - p_round) * p_unrounded
    assert abs(expected - TYPELESS.uprob) < 1e-3
    se = math.sqrt(expected * (1 - expected) / len(par))
    assert abs(np.mean(par <= limit) - expected) < 4 * se
    # and the two uniforms have the right densities: sizes 9..15 (par in [log2 8.5, log2 15.5))
    # against sizes 65..127 (par in [log2 64.5, log2 127.5)), only unrounded jobs reach those
    lo_band = np.sum((par > 8) & (par < 16))
    hi_band = np.sum((par > 64) & (par < 128))
    ratio = (_two_stage_prob(TYPELESS, NODES, math.log2(8.5), math.log2(15.5))
             / _two_stage_prob(TYPELESS, NODES, math.log2(64.5), math.log2(127.5)))
    assert ratio == pytest.approx(2.88, abs=0.01)
    assert lo_band / hi_band == pytest.approx(ratio, rel=4 * math.sqrt(1 / lo_band + 1 / hi_band))


def test_size_bounds_scaling_rule():
    assert syn.size_bounds(TYPELESS, 128) == (0.8, 4.5, 7.0)      # the published table
    assert syn.size_bounds(BATCH, 128) == (1.2, 5.0, 7.0)
    assert syn.size_bounds(INTERACTIVE, 128) == (1.0, 3.0, 5.5)
    assert syn.size_bounds(TYPELESS, 1024) == (0.8, 7.5, 10.0)
    assert syn.size_bounds(BATCH, 2) == (1.0, 1.0, 1.0)           # ULOW capped, UMED clipped
    assert syn.size_bounds(TYPELESS, 1) == (0.0, 0.0, 0.0)


def test_small_and_odd_machine_sizes():
    w = lublin_workload(jobs=2000, nodes=1, seed=0)
    assert np.all(w.procs == 1)
    w = lublin_workload(jobs=20000, nodes=100, seed=0)
    assert w.procs.max() <= 100
    pow2_sizes = w.procs[_is_pow2(w.procs)]
    assert pow2_sizes.max() == 64                                  # never rounds up to 128
    w = lublin_workload(jobs=5000, nodes=3, seed=1, interactive=True)
    assert set(np.unique(w.procs)) <= {1, 2, 3}


# ----------------------------------------------------------------------------- runtimes
def test_runtime_log_mixture_trend(big):
    """Mean log(runtime) by size follows p*A1*B1 + (1-p)*A2*B2, p = PA*size + PB: bigger = longer."""
    logr = np.log(big.runtime)
    c = TYPELESS

    def expected(size):
        p = min(max(c.pa * size + c.pb, 0.0), 1.0)
        return p * c.a1 * c.b1 + (1 - p) * c.a2 * c.b2

    means = []
    for size in (1, 2, 4, 16, 64, 256):
        sel = logr[big.procs == size]
        assert len(sel) > 500
        # flooring exp(.) lowers log(runtime) a little for short jobs; truncation at 12 is negligible
        assert np.mean(sel) == pytest.approx(expected(size), abs=4 * np.std(sel) / math.sqrt(len(sel)) + 0.05)
        means.append(np.mean(sel))
    assert all(a < b for a, b in zip(means, means[1:]))


def test_runtime_cap_and_floor():
    w = lublin_workload(jobs=50000, nodes=NODES, seed=3, interactive=True)
    assert w.runtime.min() >= 1 and w.runtime.max() <= 162754


# ----------------------------------------------------------------------------- arrivals
def test_points_to_seconds_hand_checked():
    w = np.ones(48)
    w[0], w[1] = 2.0, 0.5
    t = syn._points_to_seconds(np.array([1.0, 2.25, 2.5, 48.5 + 1.0]), w, 0)
    # 1 point is half of bucket 0 (weight 2); 2.25 = bucket 0 + half of bucket 1 (weight 0.5);
    # 2.5 = end of bucket 1; 49.5 = one whole day (48.5 points) + half of bucket 0.
    np.testing.assert_allclose(t, [900.0, 2700.0, 3600.0, 86400.0 + 900.0])


def test_arrival_inversion_equals_c_loop():
    """Our vectorised inversion gives the C program's arrival times for the same inter-arrivals."""
    rng = np.random.default_rng(0)
    for cls in (TYPELESS, BATCH, INTERACTIVE):
        wts = syn.daily_weights(cls)
        xs = np.exp(rng.gamma(cls.arrival_shape, cls.barr, size=3000).clip(max=13))
        ours = syn._points_to_seconds(np.cumsum(xs) / syn.SECONDS_IN_BUCKET, wts, 0)
        np.testing.assert_allclose(ours, _c_calc_next_arrive(xs, wts), rtol=1e-9, atol=1e-3)


def test_daily_weights_formula():
    for cls in (TYPELESS, BATCH, INTERACTIVE):
        w = syn.daily_weights(cls)
        assert w.shape == (48,) and w.mean() == pytest.approx(1.0)
        g = stats.gamma(cls.anum, scale=cls.bnum)
        raw = {(i - 1) % 48: g.cdf(i + 0.5) - g.cdf(i - 0.5) for i in range(11, 59)}
        raw = np.array([raw[k] for k in range(48)])
        np.testing.assert_allclose(w, raw / raw.mean(), rtol=1e-8)
    # m_lublin99.c's bucket index 10 holds gamma mass around i = 11, index 0 the mass around i = 49
    assert np.argmax(syn.daily_weights(TYPELESS)) == round(TYPELESS.anum * TYPELESS.bnum - TYPELESS.bnum) - 1


def test_mean_interarrival_matches_truncated_gamma_mean():
    """Averaged over whole days the cycle only reshuffles time: mean gap = E[exp(G) | G <= 13]."""
    expected = _truncated_exp_gamma_mean(TYPELESS)
    assert expected == pytest.approx(911.3, abs=0.1)
    gaps, n = [], 0
    for seed in range(3):
        w = lublin_workload(jobs=200_000, nodes=NODES, seed=seed)
        gaps.append(w.submit[-1])
        n += len(w) - 1
    mean = sum(gaps) / n
    se = _truncated_exp_gamma_sd(TYPELESS) / math.sqrt(n)     # ~0.9 % (heavy-tailed gaps)
    assert abs(mean - expected) < 4 * se


def test_arrivals_follow_daily_cycle(big):
    t = big.submit + float(big.header["FirstArrivalSinceStart"])   # seconds since the model's midnight
    counts = np.bincount(((t % 86400) // 1800).astype(int), minlength=48)
    w = syn.daily_weights(TYPELESS)
    assert np.corrcoef(counts, w)[0, 1] > 0.99
    # busiest half hour holds several times the quietest one, as the weights say
    assert counts.max() / counts.min() == pytest.approx(w.max() / w.min(), rel=0.25)


def test_interactive_mode_interleaves_two_classes():
    w = lublin_workload(jobs=200_000, nodes=128, seed=4, interactive=True)
    assert set(np.unique(w.queue)) == {0, 1}
    rate_b = 1 / _truncated_exp_gamma_mean(BATCH)
    rate_i = 1 / _truncated_exp_gamma_mean(INTERACTIVE)
    expected = rate_b / (rate_b + rate_i)                           # ~0.150
    assert abs(np.mean(w.queue == 1) - expected) < 0.02              # ~4 sd of a heavy-tailed count
    batch, inter = w.procs[w.queue == 1], w.procs[w.queue == 0]
    for sizes, cls in ((batch, BATCH), (inter, INTERACTIVE)):
        se = math.sqrt(cls.serial_prob * (1 - cls.serial_prob) / len(sizes))
        assert abs(np.mean(sizes == 1) - cls.serial_prob) < 4 * se
    assert inter.max() <= round(2 ** 5.5)                            # UHI_ACTIVE = 5.5 at 128 nodes
    assert batch.max() == 128


# ----------------------------------------------------------------------------- load knob
@pytest.mark.parametrize("interactive", [False, True])
@pytest.mark.parametrize("target", [0.5, 0.9, 1.3])
def test_load_knob_hits_target(target, interactive):
    w = lublin_workload(jobs=5000, nodes=128, seed=7, load=target, interactive=interactive)
    assert offered_load(w.submit, w.runtime, w.procs, 128) == pytest.approx(target, rel=0.02)
    assert any("our addition" in n for n in w.notes)


def test_load_knob_keeps_daily_period():
    """The rush-hour gaps are scaled, not the clock: arrivals still follow a 24 h cycle."""
    w = lublin_workload(jobs=100_000, nodes=NODES, seed=1, load=0.5)
    t = w.submit + float(w.header["FirstArrivalSinceStart"])
    counts = np.bincount(((t % 86400) // 1800).astype(int), minlength=48)
    assert np.corrcoef(counts, syn.daily_weights(TYPELESS))[0, 1] > 0.98


def test_load_knob_same_jobs_different_clock():
    a = lublin_workload(jobs=2000, nodes=64, seed=9)
    b = lublin_workload(jobs=2000, nodes=64, seed=9, load=2.0)
    np.testing.assert_array_equal(a.procs, b.procs)
    np.testing.assert_array_equal(a.runtime, b.runtime)
    assert b.submit[-1] < a.submit[-1]


# ----------------------------------------------------------------------------- Tsafrir estimates
def test_tsafrir_binnum_and_head_hand_checked():
    assert syn._binnum(200) == 20 and syn._binnum(10_000) == 90 and syn._binnum(10**6) == 565
    assert syn._binnum(100) == 14                  # 10 + round(80 * 10/180) = 10 + 4
    assert syn._binnum(30) == 11                   # 10 + round(10 * 10/180) = 10 + round(0.56)
    h = syn._head_times(48 * 3600)
    hours = [48, 45, 40, 30, 20, 18, 12, 10, 8, 6, 5, 4, 3, 2, 1]
    mins = [30, 20, 15, 10, 5]
    assert h[0] == 48 * 3600 and len(h) == 20
    assert sorted(h) == sorted([x * 3600 for x in hours] + [m * 60 for m in mins])
    sizes, _ = syn._head_sizes(20)
    assert sum(sizes) == pytest.approx(89.0)
    assert sizes[1] == pytest.approx(14.0491 * math.exp(-0.177531 * 2) + 0.462513)
    assert sizes[0] == pytest.approx(89.0 - sum(14.0491 * math.exp(-0.177531 * r) + 0.462513 for r in range(2, 21)))


def test_tsafrir_histogram_properties():
    times, counts = syn.tsafrir_histogram(10_000, 48 * 3600, np.random.default_rng(3))
    assert counts.sum() == 10_000 and len(times) == 90 and np.all(counts >= 1)
    head = set(syn._head_times(48 * 3600))
    in_head = np.isin(times, list(head))
    assert counts[in_head].sum() / 1e4 == pytest.approx(0.89, abs=0.01)
    assert times[np.argmax(counts)] == 48 * 3600                  # the maximum is the most popular
    assert counts[times == 48 * 3600][0] / 1e4 == pytest.approx(0.2173, abs=0.002)
    assert np.all(times[~in_head] % 10 == 0)                      # tail: minutes +- 10/20/30 s


def test_tsafrir_estimates_cover_runtimes():
    rng = np.random.default_rng(0)
    run = np.floor(np.exp(rng.uniform(0, 11, size=5000)))
    est = tsafrir_estimates(run, np.random.default_rng(1))
    assert np.all(est >= run)
    assert len(np.unique(est)) <= syn._binnum(5000)
    assert np.array_equal(est, tsafrir_estimates(run, np.random.default_rng(1)))
    # fewer than 200 jobs: drawn from a 200-job histogram
    small = tsafrir_estimates(run[:10], np.random.default_rng(2))
    assert np.all(small >= run[:10])
    with pytest.raises(ValueError, match="max_estimate"):
        tsafrir_estimates(np.array([200_000.0]), np.random.default_rng(0))


def test_tsafrir_remedy_when_runtimes_are_long():
    """Huge machine: every parallel job uses the long gamma; the 48 h bin is enlarged to fit."""
    run = np.full(3000, 40 * 3600.0)
    run[:1000] = 60.0
    info: dict = {}
    est = tsafrir_estimates(run, np.random.default_rng(0), info=info)
    assert np.all(est >= run)
    # more 48 h estimates than the default 21.7 % share, but no more than the 2000 long jobs need
    assert 0.2173 * 3000 < info["maxest_njobs"] <= 2000
    w = lublin_workload(jobs=3000, nodes=100_000, seed=0)
    assert np.all(w.requested_time >= w.runtime)
    assert any("documented remedy" in n for n in w.notes)


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("kwargs, match", [
    ({"jobs": 0}, "jobs=0"), ({"jobs": 2.5}, "jobs=2.5"), ({"nodes": 0}, "nodes=0"),
    ({"seed": -1}, "seed=-1"), ({"load": -0.5}, "load=-0.5"), ({"load": float("nan")}, "load=nan"),
    ({"jobs": 1, "load": 0.5}, "jobs >= 2"), ({"interactive": "yes"}, "interactive"),
])
def test_generator_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lublin_workload(**kwargs)


def test_unreachable_load_is_refused():
    with pytest.raises(SyntheticSpecError, match="whole-second"):
        lublin_workload(jobs=2, nodes=1024, seed=0, load=50.0)


def test_parse_synthetic_spec_valid():
    assert parse_synthetic_spec("synthetic") == {}
    assert parse_synthetic_spec("synthetic:jobs=5000,nodes=256,load=0.8,seed=3") == {
        "jobs": 5000, "nodes": 256, "load": 0.8, "seed": 3}
    assert parse_synthetic_spec(" synthetic: interactive=TRUE , load=none ") == {"interactive": True, "load": None}
    assert parse_synthetic_spec("synthetic:interactive=0") == {"interactive": False}
    w = lublin_workload(**parse_synthetic_spec("synthetic:jobs=300,nodes=32,seed=1"))
    assert len(w) == 300 and w.procs.max() <= 32


@pytest.mark.parametrize("spec, match", [
    ("lublin:jobs=5", "must start with 'synthetic'"),
    ("synthetic:", "empty parameter list"),
    ("synthetic:jobs=5,", "is not key=value"),
    ("synthetic:jobs", "'jobs' is not key=value"),
    ("synthetic:size=5", "unknown key 'size'"),
    ("synthetic:jobs=5,jobs=6", "given twice"),
    ("synthetic:jobs=ten", "jobs='ten' is not an integer"),
    ("synthetic:jobs=0", "jobs='0' must be >= 1"),
    ("synthetic:nodes=2.5", "nodes='2.5' is not an integer"),
    ("synthetic:seed=-3", "seed='-3' must be >= 0"),
    ("synthetic:load=abc", "load='abc' is not a number"),
    ("synthetic:load=-1", "load='-1' must be a finite number > 0"),
    ("synthetic:load=inf", "load='inf' must be a finite number > 0"),
    ("synthetic:interactive=maybe", "interactive='maybe' is not a boolean"),
])
def test_parse_synthetic_spec_errors(spec, match):
    with pytest.raises(ValueError, match=match) as exc:
        parse_synthetic_spec(spec)
    assert "allowed keys: jobs, nodes, load, seed, interactive" in str(exc.value)


# ----------------------------------------------------------------------------- vs the real trace
def _data_root() -> Path:
    env = os.environ.get("HPCTWIN_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


LUBLIN_256 = _data_root() / "Lublin-256" / "lublin_256.swf.gz"


def _read_swf(path: Path) -> dict[str, np.ndarray]:
    """Minimal SWF reader: 18 whitespace-separated fields per line, ';' comment lines."""
    rows = []
    with gzip.open(path, "rt") as fh:
        for line in fh:
            if line.strip() and not line.lstrip().startswith(";"):
                rows.append(line.split())
    a = np.array(rows, dtype=np.float64)
    assert a.shape[1] == 18
    return {"job": a[:, 0], "submit": a[:, 1], "run": a[:, 3], "procs": a[:, 4],
            "req_procs": a[:, 7], "req_time": a[:, 8]}


@pytest.mark.skipif(not LUBLIN_256.exists(), reason=f"real Lublin trace not found at {LUBLIN_256}")
def test_matches_real_lublin_256_trace():
    """lublin_256.swf (10,000 jobs, 256 nodes) came from m_lublin99.c's typeless mode.

    Tolerances: serial fraction +-0.02 and power-of-two fraction +-0.03 (binomial sd of the
    difference about 0.006 and 0.006), median runtime +-15 % (the sd of the median over
    seeds is about 4 %).
    """
    real = _read_swf(LUBLIN_256)
    assert len(real["job"]) == 10_000 and real["procs"].max() == 256
    ours = lublin_workload(jobs=10_000, nodes=256, seed=0)
    rp, op = real["procs"], ours.procs
    assert abs(np.mean(rp == 1) - np.mean(op == 1)) < 0.02
    assert abs(np.mean(_is_pow2(rp[rp > 1])) - np.mean(_is_pow2(op[op > 1]))) < 0.03
    assert np.median(ours.runtime) == pytest.approx(np.median(real["run"]), rel=0.15)
    # the trace's sizes show the same scaling rule (UMED = UHI - 2.5 = 5.5): same mass below 2^5.5
    assert abs(np.mean(rp[rp > 1] <= 45) - np.mean(op[op > 1] <= 45)) < 0.03
