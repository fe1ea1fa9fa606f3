"""Capacity curves of one serving instance, measured with the engine itself (issue 28 item 3).

``hpctwin serve profile`` and `measure_capacity`: for each offered request rate (req/s) on a grid, a seeded
Poisson workload of ``duration_s`` seconds, with (input, output) lengths drawn with replacement from a trace
(or fixed lengths: a trace's mean figures), runs on ONE fresh instance of the profile in each role:

* ``colocated`` (role ``both``): as `cluster.simulate` runs one instance; TTFT and TPOT are judged;
* ``prefill`` (a P/D prefill instance, role ``prefill``): each prompt is computed and its first token
  produced there, then the request leaves (its KV hand-off is not modelled here); TTFT is judged;
* ``decode`` (a P/D decode instance, role ``decode``): each request arrives with its prompt KV already
  computed and its first token out (as when its KV lands at its arrival time), and decodes the rest of
  its output there; TPOT is judged (``(last - arrival) / (output - 1)``). A request with one output token
  never reaches a decode instance: it is left out of the decode workload.

The workloads of the rates are coupled (the same unit-rate Poisson process and the same length draws,
arrival times divided by the rate, cut at ``duration_s``): a higher rate serves the same requests
closer together plus more, so the curves are monotone up to the engine's own effects. Requests
arriving in the first ``warmup`` fraction (10 %) of the window are served but not judged (the instance
starts empty). Every request is judged against every class's targets (FCFS serves them alike):
``attainment[class]`` = the share of judged requests meeting the class's targets that apply to the role;
``goodput_rps[class]`` = attainment x rate. ``decode_tps`` is the offered decode tokens per second (the
tokens the judged window's requests decode on this instance, per second of the window: output - 1 per
request on a decode instance, output on a colocated one, 0 on a prefill one), ``prefill_tps`` the offered
prompt tokens per second.

The **knee** of a role and class is the largest grid rate such that every grid rate up to it meets
``target`` attainment (default 0.9); none when the smallest rate misses it. The automatic grid doubles
from ``start_rps`` until every class misses the target (at most ``MAX_DOUBLINGS`` doublings), then bisects
``refine`` times between each class's last passing and first failing rate.

The capacity file (`write_capacity`): ``capacity.json`` (``format`` `FORMAT`, ``units``, the profile, the
workload's statistics, the classes, every point, the knees) and ``capacity.csv`` (one row per role, rate
and class, units in the column names). `load_capacity` reads it back, checking every field (a
`CapacityError` naming the file and the field otherwise). Times are seconds, rates requests per second.
"""
from __future__ import annotations

import csv
import json
import math
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from hpctwin.datasets.serving_traces import ServingRequest

from .instance import Instance, Req
from .limits import check_number
from .slo import DEFAULT_CLASSES, SLOClass, check_classes

if TYPE_CHECKING:  # pragma: no cover
    from .autoscale import ScaledPool
    from .engine import ServingEngine
    from .policies import PoolView

#: the capacity file's format name and version (``capacity.json``)
FORMAT, VERSION = "hpctwin-serving-capacity", 1
#: the roles an instance is profiled in
ROLES = ("colocated", "prefill", "decode")
#: the automatic grid's most doublings of ``start_rps``
MAX_DOUBLINGS = 16
#: most requests one run of the grid may hold (a bound on the work of one rate)
MAX_RUN_REQUESTS = 400_000
#: units of the file's fields
UNITS = {"rate_rps": "requests/s", "goodput_rps": "requests/s", "attainment": "fraction 0-1",
         "decode_tps": "tokens/s", "prefill_tps": "tokens/s", "ttft_p50_s": "s", "ttft_p99_s": "s",
         "tpot_p50_s": "s", "tpot_p99_s": "s", "busy_fraction": "fraction 0-1", "duration_s": "s",
         "ttft_s": "s", "tpot_s": "s"}
_SAMPLE_CHUNK = 4096


class CapacityError(ValueError):
    """A capacity file or a profiling option is wrong (the message names the file or option and the field)."""


@dataclass(frozen=True)
class CapacityPoint:
    """One run: ``role`` at ``rate_rps`` offered requests per second (see the module docstring)."""
    role: str
    rate_rps: float
    requests: int
    attainment: dict
    goodput_rps: dict
    decode_tps: float
    prefill_tps: float
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    busy_fraction: float


@dataclass
class Capacity:
    """The capacity curves of one instance profile (module docstring); `knee` reads them."""
    profile: dict
    workload: dict
    classes: tuple
    target: float
    points: list = field(default_factory=list)
    source: str = ""

    def curve(self, role: str) -> list[CapacityPoint]:
        """The points of ``role``, by rate."""
        return sorted((p for p in self.points if p.role == role), key=lambda p: p.rate_rps)

    def roles(self) -> list[str]:
        return [r for r in ROLES if any(p.role == r for p in self.points)]

    def class_names(self) -> list[str]:
        return [c.name for c in self.classes]

    def knee(self, role: str, klass: str | None = None) -> CapacityPoint | None:
        """The knee point of ``role`` for class ``klass`` (default: the first, tightest class): the largest
        rate such that every rate up to it meets the target attainment; None when the smallest misses."""
        klass = self._class(klass)
        pts = self.curve(role)
        if not pts:
            raise CapacityError(f"{self._where()}: no {role!r} curve (has {', '.join(self.roles()) or 'none'}); "
                                f"profile with --roles {role}")
        best = None
        for p in pts:
            if p.attainment[klass] >= self.target:
                best = p
            else:
                break
        return best

    def knee_rps(self, role: str, klass: str | None = None) -> float:
        """Requests/s at the knee (0 when the smallest rate misses the target)."""
        k = self.knee(role, klass)
        return k.rate_rps if k is not None else 0.0

    def decode_tps(self, role: str = "decode", klass: str | None = None) -> float:
        """Decode tokens/s one instance sustains at the knee of ``role`` (0 when none)."""
        k = self.knee(role, klass)
        return k.decode_tps if k is not None else 0.0

    def pd_ratio(self, klass: str | None = None) -> float:
        """Prefill instances per decode instance at the knees of ``klass``: the request rate one decode
        instance sustains (its knee decode tokens/s over the workload's mean decode tokens per request,
        output - 1, one-token outputs counting 0) over one prefill instance's knee rate."""
        p = self.knee_rps("prefill", klass)
        d = self.decode_tps("decode", klass)
        per = self.workload["mean_decode_tokens"]
        if p <= 0 or d <= 0 or per <= 0:
            raise CapacityError(f"{self._where()}: no P/D ratio for class {self._class(klass)!r}: a knee is "
                                "below the smallest rate profiled (lower --start-rps)")
        return (d / per) / p

    def _class(self, klass: str | None) -> str:
        names = self.class_names()
        if klass is None:
            return names[0]
        if klass not in names:
            raise CapacityError(f"{self._where()}: unknown SLO class {klass!r}; known: {', '.join(names)}")
        return klass

    def _where(self) -> str:
        return self.source or "capacity"


# ============================================================================ workloads
def _check_lengths(lengths: Sequence[ServingRequest]) -> list[tuple[int, int]]:
    if not lengths:
        raise CapacityError("capacity: no requests to draw lengths from")
    return [(int(r.input_tokens), int(r.output_tokens)) for r in lengths]


class _Sampler:
    """The unit-rate Poisson process and length draws every rate shares (one seeded generator, extended in
    fixed chunks, so a rate's workload never depends on the other rates)."""

    def __init__(self, pairs: list[tuple[int, int]], seed: int) -> None:
        self.pairs = pairs
        self.rng = np.random.default_rng(seed)
        self.t = np.zeros(0)
        self.idx = np.zeros(0, dtype=np.int64)

    def upto(self, span: float) -> tuple[np.ndarray, np.ndarray]:
        """Unit-rate arrival times < ``span`` and their length indices."""
        while not len(self.t) or self.t[-1] < span:
            e = self.rng.exponential(1.0, _SAMPLE_CHUNK)
            k = self.rng.integers(0, len(self.pairs), _SAMPLE_CHUNK)
            base = self.t[-1] if len(self.t) else 0.0
            self.t = np.concatenate([self.t, base + np.cumsum(e)])
            self.idx = np.concatenate([self.idx, k])
        n = int(np.searchsorted(self.t, span, side="left"))
        return self.t[:n], self.idx[:n]

    def trace(self, rate: float, duration_s: float) -> list[ServingRequest]:
        """The workload at ``rate`` req/s: unit-rate arrivals divided by ``rate``, up to ``duration_s``."""
        t, idx = self.upto(rate * duration_s)
        return [ServingRequest(float(a / rate), *self.pairs[int(i)]) for a, i in zip(t, idx)]


def fitting_lengths(lengths: Sequence[ServingRequest], x: Instance) -> tuple[list[ServingRequest], int]:
    """The requests of ``lengths`` whose prompt and output fit instance ``x``'s KV blocks (vLLM would refuse
    the others: max_model_len), and how many were left out."""
    cap = x.kv.num_blocks * x.kv.block_size
    keep = [r for r in lengths if r.input_tokens + r.output_tokens + 1 <= cap]
    return keep, len(lengths) - len(keep)


# ============================================================================ one run
def _run_role(make: Callable[[int], Instance], role: str, trace: list[ServingRequest]) -> tuple[Instance, list[Req]]:
    """Serve ``trace`` on one fresh instance in ``role`` (module docstring), as the engine drives one instance
    (`engine.ServingEngine`: advanced to each arrival, then given it); returns it and the requests."""
    x = make(0)
    if role != "colocated":
        x.role = "prefill" if role == "prefill" else "decode"
    reqs = [Req(i, s.arrival_s, s.input_tokens, s.output_tokens, s.token_ids, s.block_hashes, s.klass)
            for i, s in enumerate(trace)]
    for r in reqs:                                 # the trace is in arrival order
        x.advance_until(r.arrival)
        if role != "decode":
            x.add(r, r.arrival)
        else:
            r.computed, r.num_tokens, r.generated = r.prompt, r.prompt + 1, 1
            r.first = r.last = r.queued = r.arrival
            x.add_transferred(r, r.arrival)
    x.drain()
    x.handoffs.clear()
    return x, reqs


def _judge(role: str, reqs: list[Req], classes: Sequence[SLOClass]) -> tuple[dict, np.ndarray, np.ndarray]:
    """Per class: the share of ``reqs`` meeting its targets for ``role``; and the TTFT and TPOT arrays (s)."""
    ttft = np.array([r.first - r.arrival for r in reqs], float)
    tpot = np.array([(r.last - r.first) / max(1, r.output - 1) for r in reqs], float)
    att = {}
    for c in classes:
        if role == "prefill":
            ok = ttft <= c.ttft_s
        elif role == "decode":
            ok = tpot <= c.tpot_s
        else:
            ok = (ttft <= c.ttft_s) & (tpot <= c.tpot_s)
        att[c.name] = float(ok.mean()) if ok.size else float("nan")
    return att, ttft, tpot


def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if a.size else float("nan")


def measure_point(make: Callable[[int], Instance], role: str, rate: float, sampler: _Sampler, duration_s: float,
                  classes: Sequence[SLOClass], warmup: float = 0.1) -> CapacityPoint:
    """One run of ``role`` at ``rate`` req/s (module docstring)."""
    trace = sampler.trace(rate, duration_s)
    if role == "decode":
        trace = [s for s in trace if s.output_tokens >= 2]
    if len(trace) > MAX_RUN_REQUESTS:
        raise CapacityError(f"capacity: {rate:g} req/s over {duration_s:g} s is {len(trace):,} requests, more than "
                            f"{MAX_RUN_REQUESTS:,}; shorten --duration or give --rates")
    x, reqs = _run_role(make, role, trace)
    t0 = warmup * duration_s
    judged = [r for r in reqs if r.arrival >= t0]
    att, ttft, tpot = _judge(role, judged, classes)
    window = duration_s - t0
    dec = {"colocated": lambda r: r.output, "decode": lambda r: r.output - 1, "prefill": lambda r: 0}[role]
    end = max((r.last for r in reqs), default=0.0)
    return CapacityPoint(role, float(rate), len(judged), att, {k: v * rate for k, v in att.items()},
                         sum(dec(r) for r in judged) / window, sum(r.prompt for r in judged) / window,
                         _pct(ttft, 50) if role != "decode" else math.nan,
                         _pct(ttft, 99) if role != "decode" else math.nan,
                         _pct(tpot, 50) if role != "prefill" else math.nan,
                         _pct(tpot, 99) if role != "prefill" else math.nan,
                         float(min(1.0, x.busy_s / end)) if end > 0 else 0.0)


# ============================================================================ the grid
def _all_fail(p: CapacityPoint, target: float) -> bool:
    return all(not (v >= target) for v in p.attainment.values())


def measure_role(make: Callable[[int], Instance], role: str, sampler: _Sampler, duration_s: float,
                 classes: Sequence[SLOClass], target: float, rates: Sequence[float] | None = None,
                 start_rps: float = 0.125, refine: int = 3, warmup: float = 0.1) -> list[CapacityPoint]:
    """The points of ``role``: at ``rates`` when given, else the automatic grid (module docstring)."""
    if rates:
        return [measure_point(make, role, r, sampler, duration_s, classes, warmup) for r in sorted(set(rates))]
    pts = {}
    r = start_rps
    for _ in range(MAX_DOUBLINGS + 1):
        p = pts[r] = measure_point(make, role, r, sampler, duration_s, classes, warmup)
        if _all_fail(p, target):
            break
        r *= 2
    for c in classes:
        for _ in range(refine):
            seq = sorted(pts)
            lo = None
            hi = None
            for q in seq:
                if pts[q].attainment[c.name] >= target:
                    lo = q
                else:
                    hi = q
                    break
            if lo is None or hi is None:
                break
            mid = round((lo + hi) / 2, 9)
            if mid in pts or mid <= lo or mid >= hi:
                break
            pts[mid] = measure_point(make, role, mid, sampler, duration_s, classes, warmup)
    return [pts[q] for q in sorted(pts)]


def measure_capacity(make: Callable[[int], Instance], lengths: Sequence[ServingRequest], *,
                     roles: Sequence[str] = ROLES, classes: Sequence[SLOClass] = DEFAULT_CLASSES,
                     target: float = 0.9, duration_s: float = 600.0, rates: Sequence[float] | None = None,
                     start_rps: float = 0.125, refine: int = 3, seed: int = 0, warmup: float = 0.1,
                     profile: dict | None = None, source: str = "") -> Capacity:
    """Capacity curves of the instances ``make(iid)`` builds, for the lengths of ``lengths`` (module
    docstring). ``duration_s``: each run's window (s); ``target``: the knee's attainment (0-1); ``rates``:
    a fixed grid (req/s) instead of the automatic one; ``seed``: the workloads' generator."""
    classes = check_classes(classes)
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise CapacityError(f"capacity: unknown role {bad[0] if bad else ''!r}; known: {', '.join(ROLES)}")
    _check_pos(duration_s, "duration_s", "s")
    _check_pos(start_rps, "start_rps", "req/s")
    if not (isinstance(target, (int, float)) and 0 < target <= 1):
        raise CapacityError(f"capacity: target attainment must be in (0, 1], got {target!r}")
    if not (isinstance(warmup, (int, float)) and 0 <= warmup < 1):
        raise CapacityError(f"capacity: warmup must be in [0, 1), got {warmup!r}")
    if isinstance(refine, bool) or not isinstance(refine, int) or not 0 <= refine <= 20:
        raise CapacityError(f"capacity: refine must be a whole number of bisections in 0..20, got {refine!r}")
    for r in rates or ():
        _check_pos(r, "rate", "req/s")
    keep, dropped = fitting_lengths(lengths, make(0))
    if not keep:
        raise CapacityError(f"capacity: no request of the {len(lengths):,} fits the instance's KV blocks; use a "
                            "larger GPU or more TP")
    pairs = _check_lengths(keep)
    ins = np.array([p[0] for p in pairs], float)
    outs = np.array([p[1] for p in pairs], float)
    cap = Capacity(dict(profile or {}), {
        "requests_sampled_from": len(keep), "requests_left_out_too_long": dropped,
        "mean_input_tokens": float(ins.mean()), "mean_output_tokens": float(outs.mean()),
        "mean_decode_tokens": float((outs - 1).mean()), "p99_input_tokens": float(np.percentile(ins, 99)),
        "p99_output_tokens": float(np.percentile(outs, 99)), "duration_s": float(duration_s),
        "warmup_fraction": float(warmup), "seed": int(seed), "source": source}, classes, float(target))
    for role in roles:
        cap.points += measure_role(make, role, _Sampler(pairs, seed), duration_s, classes, target, rates,
                                   start_rps, refine, warmup)
    return cap


def _check_pos(v: object, name: str, unit: str) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise CapacityError(f"capacity: {name} must be a positive number of {unit}, got {v!r}")


# ============================================================================ the capacity file
def _num(v: float):
    return None if not math.isfinite(v) else v


def capacity_dict(cap: Capacity) -> dict:
    """The JSON content of ``cap`` (NaN written as null)."""
    knees = {}
    for role in cap.roles():
        knees[role] = {}
        for c in cap.classes:
            k = cap.knee(role, c.name)
            knees[role][c.name] = None if k is None else {"rate_rps": k.rate_rps, "decode_tps": k.decode_tps,
                                                           "prefill_tps": k.prefill_tps}
    pts = []
    for p in sorted(cap.points, key=lambda p: (ROLES.index(p.role), p.rate_rps)):
        d = asdict(p)
        pts.append({k: (_num(v) if isinstance(v, float) else v) for k, v in d.items()})
    return {"format": FORMAT, "version": VERSION, "units": UNITS, "target_attainment": cap.target,
            "profile": cap.profile, "workload": cap.workload,
            "classes": [{"name": c.name, "ttft_s": c.ttft_s, "tpot_s": c.tpot_s, "share": c.share}
                        for c in cap.classes],
            "points": pts, "knees": knees}


def write_capacity(cap: Capacity, folder: str | Path) -> list[Path]:
    """``capacity.json`` and ``capacity.csv`` in ``folder`` (module docstring); returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    js = folder / "capacity.json"
    js.write_text(json.dumps(capacity_dict(cap), indent=2, allow_nan=False) + "\n")
    cs = folder / "capacity.csv"
    with open(cs, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["role", "rate_rps", "slo_class", "attainment", "goodput_rps", "decode_tps", "prefill_tps",
                    "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "busy_fraction", "requests", "knee"])
        for role in cap.roles():
            for c in cap.classes:
                k = cap.knee(role, c.name)
                for p in cap.curve(role):
                    w.writerow([role, repr(p.rate_rps), c.name, repr(p.attainment[c.name]),
                                repr(p.goodput_rps[c.name]), repr(p.decode_tps), repr(p.prefill_tps),
                                *("" if math.isnan(v) else repr(v) for v in (p.ttft_p50_s, p.ttft_p99_s,
                                                                            p.tpot_p50_s, p.tpot_p99_s)),
                                repr(p.busy_fraction), p.requests, int(k is p)])
    return [js, cs]


def _field(d: dict, key: str, where: str, kind: type | tuple, path: Path):
    if not isinstance(d, dict) or key not in d:
        raise CapacityError(f"{path}: field {where + key!r} is missing")
    v = d[key]
    if kind is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise CapacityError(f"{path}: field {where + key!r}: {v!r} is not a number >= 0")
        return float(v)
    if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
        raise CapacityError(f"{path}: field {where + key!r}: {v!r} is not a {getattr(kind, '__name__', kind)}")
    return v


def _opt(d: dict, key: str, where: str, path: Path) -> float:
    v = d.get(key)
    if v is None:
        return math.nan
    return _field(d, key, where, float, path)


def load_capacity(path: str | Path) -> Capacity:
    """Read a capacity file (``capacity.json``, or the folder holding it); every field checked (a
    `CapacityError` naming the file and the field otherwise)."""
    path = Path(path)
    if path.is_dir():
        path = path / "capacity.json"
    try:
        d = json.loads(path.read_text())
    except FileNotFoundError:
        raise CapacityError(f"{path}: file not found (write one with hpctwin serve profile --out DIR)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CapacityError(f"{path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise CapacityError(f"{path}:{e.lineno}: not JSON: {e.msg}") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise CapacityError(f"{path}: field 'format': expected {FORMAT!r} (a file of hpctwin serve profile), got "
                            f"{d.get('format') if isinstance(d, dict) else type(d).__name__!r}")
    if d.get("version") != VERSION:
        raise CapacityError(f"{path}: field 'version': {d.get('version')!r} is not {VERSION}; profile again")
    target = _field(d, "target_attainment", "", float, path)
    if not 0 < target <= 1:
        raise CapacityError(f"{path}: field 'target_attainment': {target!r} is not in (0, 1]")
    raw = _field(d, "classes", "", list, path)
    try:
        classes = check_classes([SLOClass(_field(c, "name", f"classes[{i}].", str, path),
                                          _field(c, "ttft_s", f"classes[{i}].", float, path),
                                          _field(c, "tpot_s", f"classes[{i}].", float, path),
                                          _field(c, "share", f"classes[{i}].", float, path))
                                 for i, c in enumerate(raw)])
    except ValueError as e:
        if isinstance(e, CapacityError):
            raise
        raise CapacityError(f"{path}: field 'classes': {e}") from None
    wl = _field(d, "workload", "", dict, path)
    for k in ("mean_input_tokens", "mean_output_tokens", "mean_decode_tokens"):
        _field(wl, k, "workload.", float, path)
    cap = Capacity(_field(d, "profile", "", dict, path), wl, classes, target, source=str(path))
    names = [c.name for c in classes]
    for i, p in enumerate(_field(d, "points", "", list, path)):
        w = f"points[{i}]."
        role = _field(p, "role", w, str, path)
        if role not in ROLES:
            raise CapacityError(f"{path}: field {w + 'role'!r}: {role!r} is not one of {', '.join(ROLES)}")
        att = _field(p, "attainment", w, dict, path)
        good = _field(p, "goodput_rps", w, dict, path)
        for n in names:
            a = _field(att, n, w + "attainment.", float, path)
            if a > 1:
                raise CapacityError(f"{path}: field {w + 'attainment.' + n!r}: {a!r} is above 1")
            _field(good, n, w + "goodput_rps.", float, path)
        rate = _field(p, "rate_rps", w, float, path)
        if rate <= 0:
            raise CapacityError(f"{path}: field {w + 'rate_rps'!r}: {rate!r} is not above 0")
        cap.points.append(CapacityPoint(role, rate, int(_field(p, "requests", w, int, path)),
                                        {n: float(att[n]) for n in names}, {n: float(good[n]) for n in names},
                                        _field(p, "decode_tps", w, float, path),
                                        _field(p, "prefill_tps", w, float, path),
                                        _opt(p, "ttft_p50_s", w, path), _opt(p, "ttft_p99_s", w, path),
                                        _opt(p, "tpot_p50_s", w, path), _opt(p, "tpot_p99_s", w, path),
                                        _field(p, "busy_fraction", w, float, path)))
    if not cap.points:
        raise CapacityError(f"{path}: field 'points': no point; profile again")
    return cap


# ============================================================================ the printed summary
def knee_lines(cap: Capacity) -> list[str]:
    """One line per role and class: the knee (req/s, decode and prompt tokens/s), or why there is none."""
    lines = [f"knees at >= {100 * cap.target:g} % attainment (largest rate with every lower rate meeting it):"]
    for role in cap.roles():
        pts = cap.curve(role)
        for c in cap.classes:
            k = cap.knee(role, c.name)
            if k is None:
                lines.append(f"  {role:9s} {c.name:10s} none: {pts[0].rate_rps:g} req/s already misses it")
            else:
                lines.append(f"  {role:9s} {c.name:10s} {k.rate_rps:8.3f} req/s  decode {k.decode_tps:9.1f} tokens/s  "
                             f"prompt {k.prefill_tps:10.1f} tokens/s")
    if "prefill" in cap.roles() and "decode" in cap.roles():
        for c in cap.classes:
            try:
                lines.append(f"  P/D ratio ({c.name}): {cap.pd_ratio(c.name):.3f} prefill per decode instance")
            except CapacityError:
                lines.append(f"  P/D ratio ({c.name}): none (a knee is below the smallest rate)")
    return lines


# ============================================================================ heterogeneous pools
def capacity_weight(x: Instance) -> float:
    """Requests/s instance ``x`` sustains in its role by its measured capacity (``x.capacity``, an
    `autoscale.InstanceCapacity` set by `autoscale.with_capacity`); 1 for an instance without one."""
    cap = getattr(x, "capacity", None)
    if cap is None:
        return 1.0
    w = cap.weight(x.role)
    return w if w > 0 else 1.0


def capacity_weighted_router():
    """A ``pick(instances, request)`` for pools of mixed instance types: the fewest outstanding requests
    (counting this one) per request/s of measured capacity (`capacity_weight`), ties to the lowest id."""
    def pick(instances: Sequence[Instance], r: Req) -> Instance:
        return min(instances, key=lambda x: ((x.outstanding + 1) / capacity_weight(x), x.iid))
    return pick


# ============================================================================ hpctwin serve profile
PROFILE_DOC = """hpctwin serve profile: measure one instance's capacity curves with the serving engine.

    hpctwin serve profile --hardware RTXPRO6000 --model Qwen/Qwen3-32B --tp 2 --out DIR
        [--trace AzureLLMInferenceTrace_conv.csv | --input-tokens N --output-tokens M]
        [--roles colocated,prefill,decode] [--rates 0.5,1,2 | --start-rps 0.125 --refine 3]
        [--duration 600] [--target 0.9] [--slo-classes default|NAME:TTFT_S:TPOT_S[:SHARE],...] [--seed 0]

Writes DIR/capacity.json and DIR/capacity.csv (goodput in requests/s meeting each SLO class vs offered
request rate, per role; units in the file) and prints the knees: the largest rate with >= --target
attainment at it and at every lower rate. Deterministic for a seed.
"""


def parse_classes(text: str) -> tuple[SLOClass, ...]:
    """``--slo-classes``: ``default`` or ``NAME:TTFT_S:TPOT_S[:SHARE],...`` (shares default to equal)."""
    if text.strip() == "default":
        return DEFAULT_CLASSES
    out = []
    items = [x for x in text.split(",") if x.strip()]
    if not items:
        raise CapacityError("--slo-classes: empty; give default or NAME:TTFT_S:TPOT_S[:SHARE],...")
    for item in items:
        parts = item.strip().split(":")
        if len(parts) not in (3, 4):
            raise CapacityError(f"--slo-classes {item!r}: expected NAME:TTFT_S:TPOT_S[:SHARE] (e.g. tight:1:0.08)")
        try:
            nums = [float(v) for v in parts[1:]]
        except ValueError:
            raise CapacityError(f"--slo-classes {item!r}: TTFT_S, TPOT_S and SHARE must be numbers "
                                "(seconds, seconds, fraction)") from None
        out.append(SLOClass(parts[0], nums[0], nums[1], nums[2] if len(nums) == 3 else 1.0 / len(items)))
    try:
        return check_classes(out)
    except ValueError as e:
        raise CapacityError(f"--slo-classes: {e}") from None


def _rates(text: str) -> tuple[float, ...]:
    try:
        v = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        v = ()
    if not v or not all(math.isfinite(x) and x > 0 for x in v):
        raise CapacityError(f"--rates {text!r}: expected comma-separated positive request rates in req/s (e.g. 1,2,4)")
    return v


def profile_main(argv: list[str] | None = None, resolve: Callable | None = None) -> int:
    """``hpctwin serve profile`` (`PROFILE_DOC`); 0 on success, 2 on a bad input (one line on stderr).
    ``resolve(name, data_dir, folder=False) -> Path`` finds ``--trace`` (the serve command's
    `cli.resolve_input`, passed in: this module sits below the command line)."""
    import argparse  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from hpctwin.datasets.registry import DATA_DIR_HELP  # noqa: PLC0415
    from hpctwin.datasets.serving_traces import ServingTraceError, read_serving_trace  # noqa: PLC0415

    from .limits import MAX_TP, arg_dir, arg_int, arg_number  # noqa: PLC0415
    p = argparse.ArgumentParser(prog="hpctwin serve profile", description=PROFILE_DOC.split("\n\n")[0],
                                epilog="Rates are requests per second, durations seconds, lengths tokens.")
    p.add_argument("--hardware", default="RTXPRO6000", help="GPU type (a folder of LLM-serving/LLMServingSim/perf/)")
    p.add_argument("--model", default="meta-llama/Llama-3.1-8B", help="model (its timing profile on --hardware)")
    p.add_argument("--tp", type=arg_int(1, MAX_TP, "GPUs"), default=1, help="tensor-parallel GPUs per instance")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--trace", default=None,
                     help="request lengths drawn from this serving trace (default AzureLLMInferenceTrace_conv.csv)")
    src.add_argument("--input-tokens", type=arg_int(1, 10_000_000, "tokens"), default=None,
                     help="fixed prompt length instead of a trace (a trace's mean; with --output-tokens)")
    p.add_argument("--output-tokens", type=arg_int(1, 10_000_000, "tokens"), default=None,
                   help="fixed output length (with --input-tokens)")
    p.add_argument("--roles", default="colocated,prefill,decode",
                   help="comma-separated roles to profile: colocated, prefill, decode")
    p.add_argument("--rates", default=None, help="comma-separated request rates (req/s) instead of the automatic grid")
    p.add_argument("--start-rps", type=arg_number(0.0, 1e6, "req/s"), default=0.125,
                   help="first rate of the automatic grid (req/s; doubled until every class misses --target)")
    p.add_argument("--refine", type=arg_int(0, 20, "bisections"), default=3,
                   help="bisections of each knee on the automatic grid")
    p.add_argument("--duration", type=arg_number(0.0, 86_400.0, "s"), default=600.0,
                   help="window of each run (s; the first 10 %% are served but not judged)")
    p.add_argument("--target", type=arg_number(0.0, 1.0, "fraction"), default=0.9,
                   help="attainment (0-1) the knee must meet")
    p.add_argument("--slo-classes", default="default",
                   help="SLO classes: default (tight:1:0.08, standard:3:0.15, relaxed:10:0.3) or "
                        "NAME:TTFT_S:TPOT_S[:SHARE],...")
    p.add_argument("--seed", type=arg_int(0, 2 ** 63 - 1, "seed"), default=0, help="seed of the workloads")
    p.add_argument("--max-num-seqs", type=arg_int(1, 1_000_000, "sequences"), default=256,
                   help="vLLM max_num_seqs of the instance")
    p.add_argument("--max-num-batched-tokens", type=arg_int(1, 100_000_000, "tokens"), default=2048,
                   help="vLLM max_num_batched_tokens of the instance (tokens)")
    p.add_argument("--data-dir", type=arg_dir, default=None, help=DATA_DIR_HELP + " (serving: LLM-serving/)")
    p.add_argument("--out", required=True, help="output folder (capacity.json, capacity.csv); must not exist, be "
                                                "empty, or be a folder hpctwin wrote (replaced only with --force)")
    p.add_argument("--force", action="store_true", help="replace an existing output folder written by hpctwin")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")
    a = p.parse_args(argv)
    from hpctwin.twin.runfolder import staged_folder  # noqa: PLC0415

    from .deployment import PoolSpec, instance_factory  # noqa: PLC0415

    def fail(msg: str) -> int:
        print(f"hpctwin serve profile: error: {msg}", file=sys.stderr)
        return 2
    try:
        classes = parse_classes(a.slo_classes)
        roles = tuple(x.strip() for x in a.roles.split(",") if x.strip())
        bad = [r for r in roles if r not in ROLES]
        if bad or not roles:
            raise CapacityError(f"--roles {a.roles!r}: unknown role {bad[0] if bad else ''!r}; "
                                f"known: {', '.join(ROLES)}")
        rates = _rates(a.rates) if a.rates is not None else None
        if (a.input_tokens is None) != (a.output_tokens is None):
            raise CapacityError("--input-tokens and --output-tokens go together (fixed lengths), or give --trace")
        if a.input_tokens is not None:
            lengths = [ServingRequest(0.0, a.input_tokens, a.output_tokens)]
            source = f"fixed {a.input_tokens} input, {a.output_tokens} output tokens"
        else:
            name = a.trace or "AzureLLMInferenceTrace_conv.csv"
            path = resolve(name, a.data_dir, folder=False) if resolve is not None else Path(name)
            lengths = read_serving_trace(path)
            source = path.name
        spec = PoolSpec(a.hardware, a.model, tp=a.tp, max_num_seqs=a.max_num_seqs,
                        max_num_batched_tokens=a.max_num_batched_tokens)
        make = instance_factory(spec, a.data_dir)
    except (CapacityError, ServingTraceError, ValueError, FileNotFoundError) as e:
        return fail(str(e))
    profile = {"hardware": a.hardware, "model": a.model, "tp": a.tp, "gpus_per_instance": a.tp,
               "max_num_seqs": a.max_num_seqs, "max_num_batched_tokens": a.max_num_batched_tokens,
               "block_size": spec.block_size, "prefix_caching": False, "async_scheduling": spec.async_scheduling}
    try:
        with staged_folder(a.out, force=a.force) as tmp:
            cap = measure_capacity(make, lengths, roles=roles, classes=classes, target=a.target,
                                   duration_s=a.duration, rates=rates, start_rps=a.start_rps, refine=a.refine,
                                   seed=a.seed, profile=profile, source=source)
            write_capacity(cap, tmp)
    except (CapacityError, ValueError) as e:
        return fail(str(e))
    except KeyboardInterrupt:
        print(f"hpctwin serve profile: interrupted; {a.out} was not written", file=sys.stderr)
        return 130
    if not a.quiet:
        print(f"{a.model} on {a.hardware} TP {a.tp}: {len(cap.points)} runs of {a.duration:g} s, lengths from "
              f"{source} (mean {cap.workload['mean_input_tokens']:.0f} in, {cap.workload['mean_output_tokens']:.0f} "
              "out tokens)")
        print("\n".join(knee_lines(cap)))
        print(f"wrote {Path(a.out)}/: capacity.json, capacity.csv")
    return 0

# ============================================================================ scale-in stabilisation
#: Kubernetes HPA's scale-down stabilisation window (s), as `policies.HPA_DOWNSCALE_WINDOW_S` (this module
#: sits below the policy tables, which build `CapacityPDPolicy` from it)
HPA_WINDOW_S = 300.0


class _Window:
    """The highest recommendation of the last ``window_s`` seconds wins (HPA's scale-down stabilisation)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._recent: deque = deque()

    def _stabilise(self, now: float, rec: int) -> int:
        self._recent.append((now, rec))
        while self._recent and self._recent[0][0] < now - self.window_s:
            self._recent.popleft()
        return max(r for _, r in self._recent)


# ============================================================================ the decode pool's KV floor
#: headroom of the KV floor (fraction): the decode pool holds the KV it must hold now with 25 % to spare,
#: for the growth of the running requests' KV (one token per decode step) and the prompts about to land -
#: an assumption (vLLM's own default leaves 10 % of the GPU memory out, ``gpu_memory_utilization`` 0.9)
DEFAULT_KV_HEADROOM = 0.25


def check_kv_headroom(headroom: object, who: str) -> float | None:
    """``headroom`` (fraction >= 0, at most 10, or None: no floor) checked; a ValueError naming ``who``."""
    if headroom is None:
        return None
    if isinstance(headroom, bool) or not isinstance(headroom, (int, float)) or not math.isfinite(headroom) \
            or not 0 <= headroom <= 10:
        raise ValueError(f"{who}: kv_headroom must be a fraction in [0, 10] (e.g. {DEFAULT_KV_HEADROOM}: "
                         f"{100 * DEFAULT_KV_HEADROOM:g} % above the KV the decode pool holds) or None, "
                         f"got {headroom!r}")
    return float(headroom)


def kv_tokens(x: Instance) -> int:
    """Tokens of KV instance ``x`` holds at most (its blocks x block size)."""
    return x.kv.num_blocks * x.kv.block_size


def decode_kv_demand(pool: "ScaledPool") -> int:
    """Tokens of KV the decode pool ``pool`` must hold now (the occupancy signal of its KV floor):

    * on each of its active and starting members, the blocks in use x block size (its running requests,
      and the blocks set aside for the KV transfers on their way to it) plus the tokens of the requests
      queued there (landed KV not admitted yet, preempted ones: their ``num_tokens``);
    * the KV arriving from the prefill pool without blocks set aside: transfers in flight to those members
      whose blocks were not reserved, prompts done whose transfer has not started, and prompts waiting for
      an active decode instance (their computed prompt tokens).

    Transfers and queues of a restarted request's older attempt do not count; draining members do not
    (they take no new work and free their KV as they finish)."""
    eng = pool.engine
    mine = {k for k, m in enumerate(eng.members) if m.pool == pool.role and m.state in ("active", "starting")}
    tok = 0
    for k in sorted(mine):
        x = eng.members[k].x
        tok += x.kv.used * x.kv.block_size + sum(r.num_tokens for r in x.waiting)
    current = eng.retries
    # in flight: the formula's landings, or (on a topology) the flows until they land (`engine._land`)
    moving = ([(uid, att, r, k) for _, uid, att, r, k in eng.kv_land] if eng.flows is None else
              [(uid, att, r, k) for (uid, att), (r, k, _, _) in eng.inflight.items()])
    for uid, att, r, k in moving:
        if k in mine and att == current[uid] and not eng.members[k].x.kv.held(uid):
            tok += r.computed
    for _, uid, att, r, _ in eng.kv_starts:
        if att == current[uid]:
            tok += r.computed
    tok += sum(r.computed for r, _, _ in eng.waiting_d)
    return int(tok)


def kv_floor(pool: "ScaledPool", headroom: float) -> int:
    """Fewest decode instances whose KV (`kv_tokens`) holds `decode_kv_demand` x (1 + ``headroom``): the
    pool's members in creation order (active, starting, switching in: the ones a scale-in keeps), then
    new ones of the pool factory's KV (`ScaledPool.new_kv_tokens`); at least 1."""
    need = decode_kv_demand(pool) * (1.0 + headroom)
    have = [m for m in pool.engine.members if m.pool == pool.role and m.state in ("active", "starting")]
    have += pool.incoming
    total, n = 0, 0
    for m in have:
        if total >= need:
            return max(1, n)
        total += kv_tokens(m.x)
        n += 1
    if total < need:
        n += math.ceil((need - total) / max(1, pool.new_kv_tokens()) - 1e-9)
    return max(1, n)


# ============================================================================ capacity-driven P/D scaling
@dataclass(frozen=True)
class InstanceCapacity:
    """What one instance sustains at its capacity knees (`capacity.Capacity`): ``prefill_rps`` (requests/s
    as a prefill instance), ``decode_tps`` (decode tokens/s as a decode instance), per SLO class index
    ``decode_tps_by_class`` (tokens/s), and the profiled workload's ``mean_decode_tokens`` per request."""
    prefill_rps: float
    decode_tps: float
    mean_decode_tokens: float
    decode_tps_by_class: tuple = ()
    #: prompt tokens/s at the prefill knee (``prefill_signal="prompt_tps"``; 0: unknown)
    prefill_tps: float = 0.0

    def weight(self, role: str) -> float:
        """Requests/s it sustains in ``role`` (``prefill``; else decode: tokens/s over tokens per request)."""
        if role == "prefill":
            return self.prefill_rps
        return self.decode_tps / max(1e-9, self.mean_decode_tokens)


def instance_capacity(cap, klass: str | None = None) -> InstanceCapacity:
    """The `InstanceCapacity` of a `capacity.Capacity` at the knees of class ``klass`` (default the first);
    a ValueError when it lacks the prefill or decode curve, or a knee is below its smallest rate."""
    from .capacity import CapacityError  # noqa: PLC0415
    p, d = cap.knee_rps("prefill", klass), cap.decode_tps("decode", klass)
    if p <= 0 or d <= 0:
        raise CapacityError(f"{cap.source or 'capacity'}: the prefill or decode knee of class "
                            f"{klass or cap.class_names()[0]!r} is below the smallest rate profiled")
    by = tuple(cap.decode_tps("decode", c) for c in cap.class_names())
    return InstanceCapacity(p, d, cap.workload["mean_decode_tokens"], by, cap.knee("prefill", klass).prefill_tps)


def with_capacity(make: Callable[[int], Instance], ic: InstanceCapacity,
                  gpu_type: str | None = None) -> Callable[[int], Instance]:
    """``make`` whose instances carry ``ic`` as ``x.capacity`` (what `CapacityPDPolicy` and the
    ``capacity_weighted`` router read); ``.capacity`` of the returned factory is ``ic`` too. ``gpu_type``
    (e.g. ``"RTX4090"``): the instances also carry it as ``x.gpu_type`` (the autoscaler bills GPU time per
    type: `autoscale.ScaleLog.gpu_seconds_by_type`)."""
    def made(iid: int) -> Instance:
        x = make(iid)
        x.capacity = ic
        if gpu_type is not None:
            x.gpu_type = gpu_type
        return x
    made.capacity = ic
    return made


class CapacityPDPolicy:
    """HeteroScale-style P/D scaling from measured capacity (`capacity`; arXiv 2508.19559).

    At each tick the decode pool's decode tokens/s over the last interval (HeteroScale's signal, robust
    to the prompt mix) is the demand. The decode pool gets the fewest instances whose knee decode
    tokens/s (each instance its own ``x.capacity``, so mixed GPU types count at their own capacity; new
    instances at the pool factory's ``capacity``) add up to ``demand / utilization``; the prefill pool
    the fewest whose knee request rates add up to ``demand / mean decode tokens per request /
    utilization`` - for one instance type each, HeteroScale's fixed P/D ratio ``ceil(decode need x
    ratio)`` with the ratio of the capacity curves (`capacity.Capacity.pd_ratio`).

    ``per_class``: the demand is split by SLO class with the decode tokens of the requests that arrived
    in the interval (their class index ``klass`` into the capacity file's classes) and each class's
    share counts at that class's own knee: instance-equivalents = sum over classes of tokens/s / knee
    tokens/s (meaningful when instances order work by deadline slack, ``policy="slack"``; under FCFS
    every request sees the pool's one operating point, so use the tightest class's knee instead).
    Scale-in waits ``window_s`` (the highest recommendation of the window wins, HPA's stabilisation)
    and drains (`ScaledPool.resize`).

    ``prefill_signal="prompt_tps"``: the prefill pool also covers the prompt tokens/s that arrived in the
    interval at its knee prompt tokens/s (``prefill_tps``), whichever needs more - a shift of the mix to
    long prompts, which the decode TPS and a fixed ratio do not see (``"ratio"``, the default:
    HeteroScale's fixed ratio only).

    ``kv_headroom`` (a fraction, e.g. `DEFAULT_KV_HEADROOM`; None, the default: no floor): the decode pool
    never gets fewer instances than hold the KV it must hold now with that headroom (`kv_floor` of
    `decode_kv_demand`: KV in use and queued on its instances, and the KV arriving from the prefill pool),
    whatever the decode TPS says. The capacity knees hold for the length mix they were profiled on; the
    floor is what keeps a shift to longer prompts (more KV per request at the same decode TPS) from
    shrinking the pool into KV exhaustion. The floor enters ``raw`` too, so role switching
    (`autoscale._Switcher`) does not take decode instances below it; ``kv_need`` is the last floor."""

    def __init__(self, prefill: InstanceCapacity, decode: InstanceCapacity | None = None, utilization: float = 1.0,
                 window_s: float = HPA_WINDOW_S, per_class: bool = False,
                 prefill_signal: str = "ratio", kv_headroom: float | None = None) -> None:
        if not isinstance(prefill, InstanceCapacity) or not isinstance(decode or prefill, InstanceCapacity):
            raise ValueError("capacity policy: prefill and decode must be InstanceCapacity "
                             "(autoscale.instance_capacity of a capacity file)")
        if isinstance(utilization, bool) or not isinstance(utilization, (int, float)) or not 0 < utilization <= 1:
            raise ValueError(f"capacity policy: utilization must be in (0, 1], got {utilization!r}")
        check_number(window_s, "window_s", unit="s")
        if prefill_signal not in ("ratio", "prompt_tps"):
            raise ValueError(f"capacity policy: prefill_signal must be ratio or prompt_tps, got {prefill_signal!r}")
        if prefill_signal == "prompt_tps" and not prefill.prefill_tps > 0:
            raise ValueError("capacity policy: prefill_signal 'prompt_tps' needs the prefill knee's prompt tokens/s "
                             "(InstanceCapacity.prefill_tps)")
        self.prefill_signal = prefill_signal
        self.kv_headroom = check_kv_headroom(kv_headroom, "capacity policy")
        self.kv_need = 0                            # the last KV floor (decode instances; 0: none applied)
        self._pi, self._pt = 0, 0.0
        self.p_cap, self.d_cap = prefill, decode or prefill
        self.utilization, self.per_class = float(utilization), bool(per_class)
        self._p, self._d = _Window(window_s), _Window(window_s)
        self._ai = 0
        self._shares: dict[int, float] = {}
        self.raw: tuple[int, int] | None = None     # last (prefill, decode) before the scale-in window

    @property
    def ratio(self) -> float:
        """Prefill instances per decode instance (one instance type each)."""
        return self.d_cap.weight("decode") / self.p_cap.prefill_rps

    def class_shares(self, eng: "ServingEngine") -> dict[int, float]:
        """Share of the decode tokens (output - 1) of the requests that arrived since the last call, by
        class index (the previous shares when none arrived)."""
        tok: dict[int, int] = {}
        for i in eng.order[self._ai:eng.ai]:
            r = eng.reqs[i]
            tok[r.klass] = tok.get(r.klass, 0) + max(0, r.output - 1)
        self._ai = eng.ai
        tot = sum(tok.values())
        if tot > 0:
            self._shares = {k: v / tot for k, v in tok.items()}
        return self._shares

    def decode_units(self, tps: float, eng: "ServingEngine") -> float:
        """Decode demand in reference-instance units (instances of ``decode`` capacity)."""
        if not self.per_class or not self.d_cap.decode_tps_by_class:
            return tps / self.d_cap.decode_tps
        by = self.d_cap.decode_tps_by_class
        sh = self.class_shares(eng) if eng is not None else self._shares
        if not sh:
            return tps / self.d_cap.decode_tps
        units = 0.0
        for k, share in sh.items():
            cap_k = by[k] if 0 <= k < len(by) and by[k] > 0 else self.d_cap.decode_tps
            units += tps * share / cap_k
        return units

    @staticmethod
    def _count(pool: "ScaledPool", need: float, weight: Callable[[InstanceCapacity], float],
               default: InstanceCapacity) -> int:
        """Fewest instances whose weights add up to ``need``: the pool's members in creation order (active,
        starting, switching in), then new ones at the factory's capacity (``default`` without one)."""
        have = [m for m in pool.engine.members if m.pool == pool.role and m.state in ("active", "starting")]
        have += pool.incoming
        total, n = 0.0, 0
        for m in have:
            if total >= need:
                return max(1, n)
            total += weight(getattr(m.x, "capacity", None) or default)
            n += 1
        new = getattr(pool.make, "capacity", None) or default
        w = weight(new)
        if total < need:
            n += math.ceil((need - total) / w - 1e-9)
        return max(1, n)

    def desired_pd(self, vp: "PoolView", vd: "PoolView") -> tuple[int, int]:
        """(prefill, decode) for one instance type per pool, without the pools (e.g. the batch machine):
        ``ceil(units)`` decode instances and ``ceil(units x ratio)`` prefill ones, stabilised."""
        units = (vd.decode_tps / self.d_cap.decode_tps if not self.per_class
                 else self.decode_units(vd.decode_tps, None)) / self.utilization
        nd = max(1, math.ceil(units - 1e-9))
        np_ = max(1, math.ceil(units * self.ratio - 1e-9))
        return self._p._stabilise(vp.now, np_), self._d._stabilise(vd.now, nd)

    def desired_pools(self, vp: "PoolView", vd: "PoolView", P: "ScaledPool", D: "ScaledPool") -> tuple[int, int]:
        """(prefill, decode) instances for the demand seen in ``vd`` (class docstring)."""
        units = self.decode_units(vd.decode_tps, D.engine) / self.utilization
        need_tps = units * self.d_cap.decode_tps
        nd = self._count(D, need_tps, lambda c: c.decode_tps, self.d_cap)
        if self.kv_headroom is not None:
            self.kv_need = kv_floor(D, self.kv_headroom)
            nd = max(nd, self.kv_need)
        need_rps = need_tps / max(1e-9, self.d_cap.mean_decode_tokens)
        np_ = self._count(P, need_rps, lambda c: c.prefill_rps, self.p_cap)
        if self.prefill_signal == "prompt_tps":
            ptps = self.arriving_prompt_tps(P.engine, vp.now) / self.utilization
            np_ = max(np_, self._count(P, ptps, lambda c: c.prefill_tps or self.p_cap.prefill_tps, self.p_cap))
        self.raw = (np_, nd)
        return self._p._stabilise(vp.now, np_), self._d._stabilise(vd.now, nd)

    def note_switch(self, pool: str, count: int, now: float) -> None:
        """``pool`` gave instances to the other pool at ``now`` and holds ``count``: its scale-in window
        restarts from that count (`_Switcher.rebalance`)."""
        st = self._p if pool == "prefill" else self._d
        st._recent.clear()
        st._recent.append((now, count))

    def arriving_prompt_tps(self, eng: "ServingEngine", now: float) -> float:
        """Prompt tokens/s of the requests that arrived since the last call (s since then)."""
        tok = sum(eng.reqs[i].prompt for i in eng.order[self._pi:eng.ai])
        span = max(1e-9, now - self._pt)
        self._pi, self._pt = eng.ai, now
        return tok / span


def capacity_pd_policy(capacity: str, decode_capacity: str = "", slo_class: str = "", utilization: float = 1.0,
                       window_s: float = HPA_WINDOW_S, per_class: bool = False,
                       prefill_signal: str = "ratio", kv_headroom: float | None = None) -> CapacityPDPolicy:
    """The ``capacity`` P/D table entry: a `CapacityPDPolicy` from capacity files (``hpctwin serve profile``):
    ``capacity`` for the prefill instances (and the decode ones unless ``decode_capacity``, heterogeneous
    pools: prefill on one GPU type, decode on another), at the knees of ``slo_class`` (default the first);
    ``kv_headroom``: the decode pool's KV floor (`CapacityPDPolicy`; None: none)."""
    p = instance_capacity(load_capacity(capacity), slo_class or None)
    d = instance_capacity(load_capacity(decode_capacity), slo_class or None) if decode_capacity else None
    return CapacityPDPolicy(p, d, utilization, window_s, per_class, prefill_signal, kv_headroom)
