"""Per-layer vLLM timing profiles (LLMServingSim's profiler bundle) and the iteration time built from them.

How the profiles were measured (LLMServingSim ``profiler/``, ``docs/profiler/output-bundle.md``): vLLM 0.19
runs a **one-layer** copy of the model (``hf_overrides.num_hidden_layers: 1``, dummy weights, eager mode)
and hooks every module; each CSV row is one module's kernel time in microseconds for one shape:

* ``dense.csv`` (layer, tokens, time_us): token-parallel layers (embedding, norms, projections, rotary,
  activation) by the number of tokens in the forward;
* ``per_sequence.csv`` (layer, sequences, time_us): ``lm_head`` and ``sampler`` by the number of sequences;
* ``attention.csv`` (prefill_chunk, kv_prefill, n_decode, kv_decode, time_us): the attention kernel for a
  mixed batch: prefill tokens in the chunk, the KV those chunks attend to, decode count, decode KV length;
* ``moe.csv`` (tokens, activated_experts, time_us): the fused-MoE block on one rank (MoE models), profiled
  with forced routing: ``tokens`` rows, each sent to ``top_k`` of ``activated_experts`` experts cycled in
  turn (``profiler/core/hooks/moe_hook.py`` ``_cycle_expert_ids``), i.e. ``tokens x top_k`` token-expert
  pairs spread evenly over ``activated_experts`` full-width experts. LLMServingSim profiles it once at
  TP 1 and every TP degree reads that table (``trace_generator._lookup_moe``); so does `LayerProfile.load`.

At TP = k the profiled layer is the per-rank shard (heads and FFN width divided by k), so the per-rank
kernel time is read directly from ``tp<k>/``.

Composition (LLMServingSim ``serving/core/trace_generator.py``): one iteration runs the prologue once,
``num_layers`` transformer blocks, then the head; every lookup is linear interpolation in each axis
(clamped below the grid, extrapolated from the top two samples above it; the 4-D attention lookup is
linear in each of its axes, decode KV taken as the batch mean); a TP all-reduce follows ``o_proj`` and
``down_proj`` (see `allreduce_s`).
"""
from __future__ import annotations

import bisect
import csv
import io
import math
from dataclasses import dataclass, field
from numbers import Integral, Real
from pathlib import Path

import numpy as np

from .models import SEQUENCES, TP_ALLREDUCE_AFTER, ModelShape


GIB = float(1 << 30)


class ProfileError(ValueError):
    """A timing profile is missing or malformed (the message names the file and what to do)."""


def _interp1(keys: list[float], vals: list[float], q: float) -> float:
    """LLMServingSim's 1-D lookup: clamp below the first key, linear inside, linear extrapolation above."""
    n = len(keys)
    if n == 1 or q <= keys[0]:
        return vals[0]
    i = bisect.bisect_right(keys, q)
    lo, hi = (n - 2, n - 1) if i >= n else (i - 1, i)
    x0, x1 = keys[lo], keys[hi]
    return vals[lo] + (q - x0) * (vals[hi] - vals[lo]) / (x1 - x0)


def _bracket(vals: list[int], q: float) -> tuple[int, int, float]:
    n = len(vals)
    if n == 1 or q <= vals[0]:
        return 0, 0, 0.0
    i = bisect.bisect_right(vals, q)
    lo, hi = (n - 2, n - 1) if i >= n else (i - 1, i)
    return lo, hi, (q - vals[lo]) / (vals[hi] - vals[lo])


def _interp1_np(keys: np.ndarray, vals: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Vectorised `_interp1` (same clamp/extrapolation rules)."""
    if len(keys) == 1:
        return np.full(q.shape, vals[0], dtype=float)
    i = np.searchsorted(keys, q, side="right")
    hi = np.clip(i, 1, len(keys) - 1)
    lo = hi - 1
    t = (q - keys[lo]) / (keys[hi] - keys[lo])
    out = vals[lo] + t * (vals[hi] - vals[lo])
    return np.where(q <= keys[0], vals[0], out)


#: rows of one profile CSV [19,364: attention.csv of the RTX PRO 6000 profiles]
MAX_PROFILE_ROWS = 2_000_000
#: (prefill_chunk, n_decode) slices of one attention table [180]: a lookup off the grid scans them all
MAX_ATTENTION_SLICES = 20_000
#: points of one 1-D table (a dense or per-sequence layer, an MoE row) [152]: an instance's model sums the
#: dense layers over the token grid when it is built
MAX_TABLE_POINTS = 20_000
#: one layer's kernel time, us [45,155: attention at a 2,048-token chunk over 16k KV]
MAX_KERNEL_US = 1e8
#: grid coordinates (tokens, sequences, KV lengths, experts) [16,384]
MAX_GRID = 1_000_000_000
#: grid columns and their smallest value; every other column but ``layer`` is ``time_us``
_GRID_MIN = {"tokens": 1, "sequences": 1, "activated_experts": 1, "prefill_chunk": 0, "kv_prefill": 0,
             "n_decode": 0, "kv_decode": 0}


def _grid_value(text: str, path: Path, line: int, col: str) -> float:
    """A grid coordinate: a whole number (digits only) in [its minimum, `MAX_GRID`], returned as float."""
    t = text.strip()
    lo = _GRID_MIN.get(col, 0)
    if not (t.isascii() and t.isdigit()):
        raise ProfileError(f"{path}:{line}: field {col!r}: {text!r} is not a whole number; give an integer "
                           f">= {lo}")
    if not lo <= int(t) <= MAX_GRID:
        raise ProfileError(f"{path}:{line}: field {col!r}: {int(t):,} is outside [{lo}, {MAX_GRID:,}]")
    return float(text)


def _time_value(text: str, path: Path, line: int) -> float:
    """A kernel time in microseconds: finite, >= 0, at most `MAX_KERNEL_US`."""
    try:
        v = float(text)
    except ValueError:
        raise ProfileError(f"{path}:{line}: field 'time_us': {text!r} is not a number; give a finite number of "
                           "microseconds >= 0") from None
    if not math.isfinite(v):
        shown = "NaN" if math.isnan(v) else text.strip()
        raise ProfileError(f"{path}:{line}: field 'time_us': {shown} is not a time; give a finite number of "
                           "microseconds >= 0")
    if v < 0:
        raise ProfileError(f"{path}:{line}: field 'time_us': {v:g} is negative; give a finite number of "
                           "microseconds >= 0")
    if v > MAX_KERNEL_US:
        raise ProfileError(f"{path}:{line}: field 'time_us': {v:g} us is {v / 1e6:g} s for one layer's kernel, "
                           f"more than the plausible limit of {MAX_KERNEL_US:g} us (nanoseconds given for "
                           "microseconds?)")
    return v


def _profile_text(path: Path) -> str:
    """The CSV's text (strict UTF-8, BOM dropped); errors name the file (and the line of a bad byte)."""
    if not path.exists():
        raise ProfileError(f"{path}: profile file not found")
    if not path.is_file():
        raise ProfileError(f"{path}: not a regular file")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ProfileError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        gz = " (gzip data: decompress it)" if raw[:2] == b"\x1f\x8b" else ""
        raise ProfileError(f"{path}:{line}: byte 0x{raw[e.start]:02x} is not UTF-8 text; a profile CSV is UTF-8"
                           f"{gz}") from None
    return text.removeprefix("\ufeff")


def _read_csv(path: Path, cols: list[str]) -> list[dict]:
    """The rows of a profile CSV as ``{column: value}`` (``layer`` a string, every other column a float),
    each value checked: grid columns whole numbers, ``time_us`` finite and >= 0; one row per shape; at most
    `MAX_PROFILE_ROWS` rows and at least one. Columns beyond ``cols`` are ignored."""
    rd = csv.DictReader(io.StringIO(_profile_text(path), newline=""))
    try:
        if rd.fieldnames is None:
            raise ProfileError(f"{path}: empty file (expected the header {','.join(cols)} and rows)")
        missing = [c for c in cols if c not in rd.fieldnames]
        if missing:
            raise ProfileError(f"{path}:1: missing column(s) {', '.join(missing)} (expected {','.join(cols)})")
        rows: list[dict] = []
        seen: dict[tuple, int] = {}
        for r in rd:
            i = rd.line_num
            if len(rows) >= MAX_PROFILE_ROWS:
                raise ProfileError(f"{path}:{i}: more than {MAX_PROFILE_ROWS:,} rows, beyond the limit of a profile "
                                   "table (docs/serving.md, Input checks and limits)")
            row: dict = {}
            for c in cols:
                v = r.get(c)
                if v is None:
                    raise ProfileError(f"{path}:{i}: field {c!r}: missing (the row has fewer columns than the "
                                       "header)")
                if c == "layer":
                    if not v.strip():
                        raise ProfileError(f"{path}:{i}: field 'layer': empty layer name")
                    row[c] = v
                elif c == "time_us":
                    row[c] = _time_value(v, path, i)
                else:
                    row[c] = _grid_value(v, path, i, c)
            key = tuple(row[c] for c in cols if c != "time_us")
            if key in seen:
                raise ProfileError(f"{path}:{i}: duplicate row for " + ", ".join(
                    f"{c}={row[c] if c == 'layer' else int(row[c])}" for c in cols if c != "time_us")
                    + f" (first at line {seen[key]}); give one time per shape")
            seen[key] = i
            rows.append(row)
    except csv.Error as e:
        raise ProfileError(f"{path}:{rd.line_num}: not valid CSV: {e}") from None
    if not rows:
        raise ProfileError(f"{path}: holds no row (a header only); a profile table needs at least one")
    return rows


def available_profiles(perf_root: Path) -> list[str]:
    """``hardware model tp<k>`` of every profile folder under ``perf_root`` (``<hw>/<model>/bf16/tp<k>/``,
    the model name with or without its organisation), sorted."""
    perf_root = Path(perf_root)
    if not perf_root.is_dir():
        return []
    out = []
    for pattern in ("*/*/bf16/tp*", "*/*/*/bf16/tp*"):
        for d in perf_root.glob(pattern):
            if d.is_dir():
                parts = d.relative_to(perf_root).parts
                out.append(f"{parts[0]} {'/'.join(parts[1:-2])} {parts[-1]}")
    return sorted(out)


def find_profile(perf_root: Path, hardware: str, model: str, tp: int) -> Path:
    """The profile folder ``perf_root/<hardware>/<model>/bf16/tp<tp>/``; a `ProfileError` listing the
    profiles that exist when it does not."""
    folder = Path(perf_root) / hardware / model / "bf16" / f"tp{tp}"
    if folder.is_dir():
        return folder
    have = available_profiles(perf_root)
    raise ProfileError(f"{folder}: no timing profile for model {model} on hardware {hardware} at TP {tp}; "
                       + (f"available (hardware model tp): {'; '.join(have)}" if have else
                          f"no profile at all under {perf_root} (give --data-dir)"))


@dataclass
class AttentionTable:
    """The 4-D attention grid as (prefill_chunk, n_decode) slices over (kv_prefill, kv_decode); microseconds."""
    pc_vals: list[int]
    nd_vals: list[int]
    slices: dict[tuple[int, int], tuple[list[int], list[tuple[list[int], list[float]]]]]
    #: (pc, nd) -> the nearest slice of a grid corner that has none (`_corner`), found once
    _near: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_rows(cls, rows: list[dict]) -> "AttentionTable":
        grid: dict[tuple[int, int], dict[int, dict[int, float]]] = {}
        for r in rows:
            key = (int(r["prefill_chunk"]), int(r["n_decode"]))
            grid.setdefault(key, {}).setdefault(int(r["kv_prefill"]), {})[int(r["kv_decode"])] = r["time_us"]
        slices = {}
        for key, by_kp in grid.items():
            kps = sorted(by_kp)
            slices[key] = (kps, [(sorted(by_kp[k]), [by_kp[k][d] for d in sorted(by_kp[k])]) for k in kps])
        return cls(sorted({k[0] for k in grid}), sorted({k[1] for k in grid}), slices)

    def _slice(self, pc: int, nd: int, kvp: float, kvd: float) -> float | None:
        s = self.slices.get((pc, nd))
        if s is None:
            return None
        kps, rows = s
        lo, hi, t = _bracket(kps, kvp)
        v_lo = _interp1(rows[lo][0], rows[lo][1], kvd) if rows[lo][0] else None
        if lo == hi or v_lo is None:
            return v_lo
        v_hi = _interp1(rows[hi][0], rows[hi][1], kvd) if rows[hi][0] else None
        return v_lo if v_hi is None else v_lo + t * (v_hi - v_lo)

    def _corner(self, pc: int, nd: int, kvp: float, kvd: float) -> float:
        v = self._slice(pc, nd, kvp, kvd)
        if v is not None:
            return v
        near = self._near.get((pc, nd))
        if near is None:
            near = self._near[(pc, nd)] = min(self.slices, key=lambda p: (p[0] - pc) ** 2 + (p[1] - nd) ** 2)
        return self._slice(near[0], near[1], kvp, kvd) or 0.0

    def lookup(self, pc: int, kvp: float, nd: int, kvd: float) -> float:
        """Attention time (us) of a batch with ``pc`` prefill tokens attending to ``kvp`` KV tokens and
        ``nd`` decodes of mean KV length ``kvd`` (LLMServingSim ``_lookup_attention``)."""
        lp, hp, tp_ = _bracket(self.pc_vals, pc)
        ln, hn, tn = _bracket(self.nd_vals, nd)
        c00 = self._corner(self.pc_vals[lp], self.nd_vals[ln], kvp, kvd)
        c01 = self._corner(self.pc_vals[lp], self.nd_vals[hn], kvp, kvd)
        c10 = self._corner(self.pc_vals[hp], self.nd_vals[ln], kvp, kvd)
        c11 = self._corner(self.pc_vals[hp], self.nd_vals[hn], kvp, kvd)
        v0 = c00 + tn * (c01 - c00)
        v1 = c10 + tn * (c11 - c10)
        return max(0.001, v0 + tp_ * (v1 - v0))

    def decode_only_np(self, nd: int, kvd: np.ndarray) -> np.ndarray:
        """Vectorised lookup for pure-decode batches of ``nd`` decodes over many mean KV lengths (us)."""
        ln, hn, tn = _bracket(self.nd_vals, nd)

        def corner(ndv: int) -> np.ndarray:
            s = self.slices.get((0, ndv))
            if s is None or not s[1] or not s[1][0][0]:
                return np.array([self._corner(0, ndv, 0, float(k)) for k in kvd])
            keys, vals = s[1][0]  # kv_prefill = 0 row
            return _interp1_np(np.asarray(keys, float), np.asarray(vals, float), kvd)

        c0 = corner(self.nd_vals[ln])
        c1 = corner(self.nd_vals[hn]) if hn != ln else c0
        return np.maximum(0.001, c0 + tn * (c1 - c0))


@dataclass
class LayerProfile:
    """The profile of one (hardware, model, TP degree): 1-D tables (us) and the attention grid."""
    path: Path
    dense: dict[str, tuple[list[float], list[float]]]
    per_sequence: dict[str, tuple[list[float], list[float]]]
    attention: AttentionTable
    moe: dict[int, tuple[list[float], list[float]]] = field(default_factory=dict)
    #: TP degree at which ``moe`` was profiled (1: the single-rank, full-width view of ``tp1/moe.csv``)
    moe_tp: int = 1

    @classmethod
    def load(cls, folder: Path) -> "LayerProfile":
        folder = Path(folder)
        if not folder.is_dir():
            raise ProfileError(f"{folder}: no profile folder (expected perf/<hardware>/<model>/bf16/tp<k>/ "
                               "with dense.csv, attention.csv, per_sequence.csv)")

        def bounded(table: dict, where: Path, what: str) -> dict:
            for k, v in table.items():
                if len(v) > MAX_TABLE_POINTS:
                    raise ProfileError(f"{where}: {what} {k}: {len(v):,} grid points, more than the limit of "
                                       f"{MAX_TABLE_POINTS:,} (docs/serving.md, Input checks and limits)")
            return table

        def one_d(name: str, key: str) -> dict:
            out: dict[str, dict[float, float]] = {}
            for r in _read_csv(folder / name, ["layer", key, "time_us"]):
                out.setdefault(r["layer"], {})[r[key]] = r["time_us"]
            bounded(out, folder / name, "layer")
            return {k: (sorted(v), [v[x] for x in sorted(v)]) for k, v in out.items()}

        moe: dict[int, dict[float, float]] = {}
        moe_path, moe_tp = _moe_table(folder)
        if moe_path is not None:
            for r in _read_csv(moe_path, ["tokens", "activated_experts", "time_us"]):
                moe.setdefault(int(r["activated_experts"]), {})[r["tokens"]] = r["time_us"]
            bounded(moe, moe_path, "activated_experts")
        dense, per_seq = one_d("dense.csv", "tokens"), one_d("per_sequence.csv", "sequences")
        att = AttentionTable.from_rows(_read_csv(folder / "attention.csv",
                                                 ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us"]))
        if len(att.slices) > MAX_ATTENTION_SLICES:
            raise ProfileError(f"{folder / 'attention.csv'}: {len(att.slices):,} (prefill_chunk, n_decode) slices, "
                               f"more than the limit of {MAX_ATTENTION_SLICES:,} (a lookup off the grid scans them "
                               "all; docs/serving.md, Input checks and limits)")
        return cls(folder, dense, per_seq, att, {k: (sorted(v), [v[x] for x in sorted(v)]) for k, v in moe.items()},
                   moe_tp)

    def dense_us(self, layer: str, tokens: float) -> float:
        if layer not in self.dense:
            raise ProfileError(f"{self.path / 'dense.csv'}: no rows for layer {layer!r} "
                               f"(has {', '.join(sorted(self.dense))})")
        k, v = self.dense[layer]
        return max(0.001, _interp1(k, v, max(tokens, 1)))

    def per_sequence_us(self, layer: str, seqs: float) -> float:
        k, v = self.per_sequence[layer]
        return max(0.001, _interp1(k, v, max(seqs, 1)))

    def moe_us(self, tokens: float, activated: float) -> float:
        """LLMServingSim ``_lookup_moe``: 1-D in tokens per activated-expert row, then linear across rows."""
        if not self.moe:
            raise ProfileError(f"{self.path}: moe.csv is needed for a mixture-of-experts model")
        aes = sorted(self.moe)
        i = bisect.bisect_right(aes, activated)
        if i == 0:
            lo = hi = 0
        elif i >= len(aes):
            lo, hi = (len(aes) - 2, len(aes) - 1) if len(aes) > 1 else (0, 0)
        else:
            lo, hi = i - 1, i
        v_lo = _interp1(*self.moe[aes[lo]], max(tokens, 1))
        if lo == hi:
            return max(0.001, v_lo)
        v_hi = _interp1(*self.moe[aes[hi]], max(tokens, 1))
        return max(0.001, v_lo + (activated - aes[lo]) * (v_hi - v_lo) / (aes[hi] - aes[lo]))


def _moe_table(folder: Path) -> tuple[Path | None, int]:
    """The ``moe.csv`` a ``tp<k>/`` profile uses and the TP degree it was profiled at: the sibling
    ``tp1/moe.csv`` when it exists (LLMServingSim ``_lookup_moe``: "MoE is profiled once at tp=1",
    ``tp_eff = 1 if 1 in available_tps``; the data's bundles have no ``tp2/moe.csv``), else the folder's own."""
    tp1 = folder.parent / "tp1" / "moe.csv"
    if tp1.exists():
        return tp1, 1
    own = folder / "moe.csv"
    if not own.exists():
        return None, 1
    name = folder.name
    return own, int(name[2:]) if name.startswith("tp") and name[2:].isdigit() else 1


def linear_run(t0: float, t_limit: float, steps: int, a: float, b: float) -> tuple[int, float, float]:
    """Up to ``steps`` iterations of times ``a + b j`` from ``t0``, keeping those that start before
    ``t_limit`` (iteration 0 always runs): (count, start of the last, end of the last), seconds."""
    lo, hi = 1, max(1, steps)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if t0 + (mid - 1) * a + b * (mid - 1) * (mid - 2) / 2 < t_limit:
            lo = mid
        else:
            hi = mid - 1
    c = lo
    return c, t0 + (c - 1) * a + b * (c - 1) * (c - 2) / 2, t0 + c * a + b * c * (c - 1) / 2


def skew_alpha_from_meta(meta_yaml: Path, tp: int) -> float:
    """``skew_fit.per_tp[tp].alpha_default`` of a profile's ``meta.yaml`` (0 when skew fitting is disabled
    or the file is absent). LLMServingSim falls back to this pooled alpha when the per-bucket table
    ``tp<k>/skew_fit.csv`` is missing, which is the case for the bundles in the data directory (the
    MANIFEST: large skew profiles were left out). A minimal reader of just these keys, so that no YAML
    dependency is needed."""
    meta_yaml = Path(meta_yaml)
    if not meta_yaml.exists():
        return 0.0
    lines = meta_yaml.read_text().splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.rstrip() == "skew_fit:")
    except StopIteration:
        return 0.0
    block = []
    for ln in lines[start + 1:]:
        if ln and not ln.startswith(" "):
            break
        block.append(ln)
    if not any(ln.strip() == "enabled: true" for ln in block[:3]):
        return 0.0
    in_tp = False
    for ln in block:
        st = ln.strip()
        if st.endswith(":") and st[:-1].isdigit():
            in_tp = int(st[:-1]) == tp
        elif in_tp and st.startswith("alpha_default:"):
            try:
                alpha = float(st.split(":", 1)[1])
            except ValueError:
                raise ProfileError(f"{meta_yaml}: skew_fit.per_tp.{tp}.alpha_default is not a number: {st!r}") \
                    from None
            if not (math.isfinite(alpha) and alpha >= 0):
                raise ProfileError(f"{meta_yaml}: skew_fit.per_tp.{tp}.alpha_default: {alpha} must be a finite "
                                   "number >= 0 (the skew blend of the attention time)")
            return alpha
    return 0.0


def allreduce_s(nbytes: float, ranks: int, link_bw_GBps: float, link_latency_ns: float) -> float:
    """Ring all-reduce time (s) of ``nbytes`` per rank over ``ranks`` on fully connected links:
    ``2 (p - 1)`` steps, each one latency plus a ``1/p`` chunk at the link bandwidth (ASTRA-Sim's
    analytical ring collective, which LLMServingSim drives with the cluster's ``link_bw`` in GB/s
    and ``link_latency`` in ns). As in astra-network-analytical's ``bw_GBps_to_Bpns``, 1 GB = 2^30 B."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    return 2 * (ranks - 1) * (link_latency_ns * 1e-9 + nbytes / ranks / (link_bw_GBps * GIB))


@dataclass
class IterationModel:
    """Iteration time (s) of one instance: profiles x layer walk x TP/EP communication."""
    shape: ModelShape
    prof: LayerProfile
    tp: int = 1
    link_bw_GBps: float = 16.0
    link_latency_ns: float = 1000.0
    ep: int = 1
    #: members of the instance's data-parallel group (1: no DP group); with EP their tokens are all-gathered
    #: to every EP rank's experts (`_moe_us`)
    dp: int = 1
    #: per-GPU memory bandwidth (GB/s, ``npu_mem.mem_bw`` of the cluster config) for the MoE buffer traffic
    #: a sharded rank moves beyond its profile row (`moe_extra_bytes`); 0 leaves that term out
    mem_bw_GBps: float = 0.0
    #: fixed host-side time added to every iteration (s); 0 by default (see docs/serving.md)
    overhead_s: float = 0.0
    #: attention skew blend for decodes of unequal context (`skew_alpha_from_meta`); 0 = none
    skew_alpha: float = 0.0

    def __post_init__(self) -> None:
        for name, lo in (("tp", 1), ("ep", 1), ("dp", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, Integral) or v < lo:
                raise ProfileError(f"IterationModel: {name} = {v!r}: an integer >= {lo} is needed")
        for name, lo_open in (("link_bw_GBps", True), ("link_latency_ns", False), ("mem_bw_GBps", False),
                              ("overhead_s", False), ("skew_alpha", False)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v) or v < 0 or (lo_open and v == 0):
                raise ProfileError(f"IterationModel: {name} = {v!r}: a finite number {'>' if lo_open else '>='} 0 "
                                   "is needed")
        seq = SEQUENCES.get(self.shape.model_type)
        if seq is None:
            raise ProfileError(f"no layer walk for model_type {self.shape.model_type!r} "
                               f"(known: {', '.join(SEQUENCES)})")
        self._block_dense = [x for x in seq["pre_attn"] + seq["post_attn"] + seq["mlp"]
                             if x not in ("attention", "moe")]
        self._edge_dense = [x for x in seq["prologue"] + seq["head"] if x not in self.prof.per_sequence]
        self._per_seq = [x for x in seq["head"] if x in self.prof.per_sequence]
        self._has_moe = "moe" in seq["mlp"]
        for name in self._block_dense + self._edge_dense:
            if name not in self.prof.dense:
                raise ProfileError(f"{self.prof.path / 'dense.csv'}: no rows for layer {name!r} needed by "
                                   f"model_type {self.shape.model_type}")
        # one summed dense table: every dense layer is profiled on the same token grid
        grid = self.prof.dense[self._block_dense[0]][0]
        self._tok_grid = np.asarray(grid, float)
        L = self.shape.num_layers
        tot = np.zeros(len(grid))
        for name in self._block_dense:
            tot += L * np.asarray([self.prof.dense_us(name, g) for g in grid])
        for name in self._edge_dense:
            tot += np.asarray([self.prof.dense_us(name, g) for g in grid])
        self._dense_sum = tot
        self._dense_keys = list(grid)
        self._dense_vals = list(tot)
        self._n_ar = sum(1 for x in self._block_dense if x in TP_ALLREDUCE_AFTER) * L
        if self._has_moe and self.tp > 1 and self.dp <= 1:
            # a lone TP instance all-reduces the MoE block's output over its TP ranks, whether the experts
            # are TP-sharded (intermediate/tp slices) or split by EP inside the instance (the EP group is
            # the TP group; tokens are already replicated, so nothing is dispatched): vLLM qwen3_moe.py
            # Qwen3MoeSparseMoeBlock.forward ``maybe_all_reduce_tensor_model_parallel`` when tp_size > 1,
            # FusedMoE(reduce_results=True) in mixtral.py. A DP group's combine is `ep_comm_s` instead
            self._n_ar += L
        self._cache: dict[int, float] = {}

    def token_parallel_s(self, tokens: int) -> float:
        """Everything that depends only on the batch's token count: dense layers, MoE, TP all-reduces (s)."""
        v = self._cache.get(tokens)
        if v is None:
            us = _interp1(self._dense_keys, self._dense_vals, max(tokens, 1))
            if self._has_moe:
                us += self.shape.num_layers * self._moe_us(tokens)
            ar = self._n_ar * allreduce_s(tokens * self.shape.hidden * self.shape.dtype_bytes, self.tp,
                                          self.link_bw_GBps, self.link_latency_ns)
            v = us * 1e-6 + ar + self.overhead_s
            self._cache[tokens] = v
        return v

    def moe_lookup(self, tokens: int) -> tuple[float, float]:
        """(tokens, activated experts) at which one rank's MoE block reads the profile, for a forward of
        ``tokens`` tokens on each member of the instance's DP group.

        * Tokens the rank's experts serve: ``n = dp x tokens``. With DP + EP vLLM's default
          ``allgather_reducescatter`` backend all-gathers every DP rank's (padded) tokens before the experts
          (``AgRsAll2AllManager.dispatch``: ``all_gatherv`` over the DP group), so each EP rank computes its
          local experts on the whole group's tokens; without DP the instance's tokens (replicated on its TP
          ranks).
        * Shards ``s`` of the expert weights: ``ep`` ranks each holding ``E / ep`` full experts (FusedMoE's
          ``expert_map``), else ``tp`` ranks each holding every expert's ``intermediate / tp`` slice (relative
          to the TP degree of the table, 1 for ``tp1/moe.csv``).
        * Balanced gate (LLMServingSim ``GateRouter._balanced_route_ep``, its default ``BALANCED`` policy:
          load-balance-regularised gates spread pairs evenly; pigeonhole count of activated experts):
          ``n k`` token-expert pairs, ``min(n k, E)`` distinct experts over the whole model, an ``s``-th of
          both on each rank.
        * The profile row (T tokens, A experts) holds ``T k`` pairs over A full-width experts, so a rank's
          work equals the row at ``T = n / s`` (pairs / k) and ``A = min(n k, E) / s``: GEMM FLOPs follow the
          pairs, the weights read follow the activated experts (bytes per rank: ``s``-th of the activated
          full-width experts in both the EP and the TP layout).
        """
        k, E = self.shape.experts_per_token, self.shape.num_experts
        n = max(tokens, 1) * max(self.dp, 1)
        s = self.moe_shards()
        return n / s, min(n * k, E) / s

    def moe_shards(self) -> int:
        """Ranks sharing the expert weights (`moe_lookup`): the EP degree, else the TP degree relative to
        the table's; without EP the experts of a DP group are TP-sharded over all its DP x TP ranks (vLLM
        data-parallel deployment docs: "the expert layers will by default form a (DP x TP) sized tensor
        parallel group")."""
        if self.ep > 1:
            return self.ep
        return max(1, (self.tp * max(self.dp, 1)) // max(self.prof.moe_tp, 1))

    def moe_comm_ranks(self) -> int:
        """Ranks of a DP group's MoE dispatch/combine collectives (`ep_comm_s`): its EP group, or its
        DP x TP ranks when the experts are TP-sharded; 1 (none) outside a DP group, where the block output
        is all-reduced over TP instead (``_n_ar``)."""
        if not self._has_moe or self.dp <= 1:
            return 1
        return self.ep if self.ep > 1 else self.tp * self.dp

    def moe_extra_bytes(self, tokens: int) -> float:
        """Bytes of MoE buffers one sharded rank reads and writes beyond those of its profile row
        (`moe_lookup`), for a forward of ``tokens`` tokens on each DP member.

        vLLM's Triton experts (``fused_moe.py`` ``TritonExperts.apply``) size every buffer by the rank's
        ``R`` rows x ``k`` top-k slots, whether or not the slot's expert is local: ``moe_align_block_size``
        without ``ignore_invalid_experts`` marks blocks of experts held by another EP rank ``-1``, and
        ``fused_moe_kernel`` zero-stores their output tile (``write_zeros_to_output``) in both GEMMs; the
        activation runs on all of ``intermediate_cache1`` and ``moe_sum`` reads every slot of
        ``intermediate_cache3``. Per slot that is ``2I`` (w13 out) + ``3I`` (activation in and out) of the
        expert width ``I`` on the rank (``moe_intermediate``, / tp when TP-sharded) and ``2h`` (w2 out,
        moe_sum in), plus ``h`` per row out of moe_sum. The profile row (``T`` rows, ``T k`` slots, full
        width) already holds its own; the excess is what the rank moves in addition (0 on an unsharded
        rank)."""
        sh = self.shape
        k, h, inter, f = sh.experts_per_token, sh.hidden, sh.moe_intermediate, sh.dtype_bytes
        rows = max(tokens, 1) * max(self.dp, 1)
        t, _ = self.moe_lookup(tokens)
        width = inter if self.ep > 1 else inter / self.moe_shards()
        real = rows * k * (5 * width + 2 * h) + rows * h
        row = t * k * (5 * inter + 2 * h) + t * h
        return max(0.0, f * (real - row))

    def _moe_us(self, tokens: int) -> float:
        """One rank's MoE block (us) for a forward of ``tokens`` tokens: the profile row of `moe_lookup`
        plus its `moe_extra_bytes` at the GPU's memory bandwidth (no overlap with compute assumed)."""
        t, a = self.moe_lookup(tokens)
        us = self.prof.moe_us(t, max(a, 1.0))
        if self.mem_bw_GBps > 0:
            us += self.moe_extra_bytes(tokens) / (self.mem_bw_GBps * 1e3)
        return us

    def attention_us(self, pc: int, kvp: int, nd: int, kvd: int, kvd_max: int = 0, kvd_min: int = 0) -> float:
        """One layer's attention (us), with LLMServingSim's skew correction: a batch of decodes of
        unequal context is slower than a uniform batch at the mean, ``t = t_mean + alpha (t_max - t_mean)``
        with ``t_max`` the lookup at the longest decode context (``_lookup_attention_with_skew``)."""
        att = self.prof.attention
        t_mean = att.lookup(pc, kvp, nd, kvd)
        if self.skew_alpha == 0.0 or nd <= 1 or kvd_max == kvd:
            return t_mean
        t_max = att.lookup(pc, kvp, nd, kvd_max)
        return t_mean + self.skew_alpha * (t_max - t_mean) if t_max > t_mean else t_mean

    def iteration_s(self, tokens: int, seqs: int, pc: int, kvp: int, nd: int, kvd: int, kvd_max: int = 0,
                    kvd_min: int = 0) -> float:
        """Time (s) of one forward over ``tokens`` tokens of ``seqs`` sequences: ``pc`` prefill tokens
        attending to ``kvp`` cached tokens in total, ``nd`` decodes of mean context ``kvd`` (longest
        ``kvd_max``, shortest ``kvd_min``)."""
        us = self.shape.num_layers * self.attention_us(pc, kvp, nd, kvd, kvd_max, kvd_min)
        for name in self._per_seq:
            us += self.prof.per_sequence_us(name, seqs)
        return self.token_parallel_s(tokens) + us * 1e-6

    def ep_comm_s(self, tokens: int) -> float:
        """Expert-parallel dispatch and combine of one iteration over `moe_comm_ranks` (s): per MoE layer a
        ring all-gather of each rank's ``tokens / ep`` hidden states plus router logits, and a ring
        reduce-scatter of ``tokens`` hidden states (vLLM's ``allgather_reducescatter`` all2all backend;
        sizes as LLMServingSim ``_emit_moe_block``, anchored to the group's padded token count)."""
        ep = self.moe_comm_ranks()
        if ep <= 1:
            return 0.0
        f, h = self.shape.dtype_bytes, self.shape.hidden
        lat, bw = self.link_latency_ns * 1e-9, self.link_bw_GBps * GIB
        ag = (ep - 1) * (lat + max(1, tokens // ep) * (h + self.shape.num_experts) * f / bw)
        rs = (ep - 1) * (lat + tokens * h * f / ep / bw)
        return self.shape.num_layers * (ag + rs)

    def padded_iteration_s(self, shape: tuple, padded_tokens: int) -> float:
        """Iteration time (s) of a DP member whose batch ``shape`` (see `Batch.shape`) is padded to the
        group's ``padded_tokens``: token-parallel layers and the MoE block at the padded size, attention on
        the real requests, ``lm_head`` and the sampler on the real sequences only (vLLM
        ``GPUModelRunner.execute_model`` computes logits at ``logits_indices``, the last token of each
        scheduled request, never at DP padding; an idle member's dummy batch, ``seqs`` 0, runs
        ``_dummy_run`` without the sampler), plus the EP collectives."""
        tokens, seqs, pc, kvp, nd, kvd, kmax, kmin = shape
        us = self.shape.num_layers * self.attention_us(pc, kvp, nd, kvd, kmax, kmin)
        if seqs > 0:
            for name in self._per_seq:
                us += self.prof.per_sequence_us(name, seqs)
        return self.token_parallel_s(max(tokens, padded_tokens)) + us * 1e-6 + self.ep_comm_s(padded_tokens)

    def _decode_line(self, nd: int) -> tuple[list[float], list[float], list[float]] | None:
        """One layer's pure-decode attention time (us) for ``nd`` decodes as a piecewise-linear function
        of the mean context: (knots, values at the knots, slope of each segment incl. the one beyond the
        last knot). None when it is not nondecreasing (then the vectorised path is used)."""
        cache = self.__dict__.setdefault("_lines", {})
        if nd in cache:
            return cache[nd]
        att = self.prof.attention
        ln, hn, tn = _bracket(att.nd_vals, nd)
        rows = []
        for ndv in {att.nd_vals[ln], att.nd_vals[hn]}:
            sl = att.slices.get((0, ndv))
            if sl is None or not sl[1] or not sl[1][0][0] or sl[0][0] != 0:
                cache[nd] = None
                return None
            rows.append(sl[1][0][0])
        knots = sorted(set().union(*rows))
        vals = [att.lookup(0, 0, nd, k) for k in knots]
        if len(knots) < 2:
            cache[nd] = None
            return None
        slopes = [(vals[i + 1] - vals[i]) / (knots[i + 1] - knots[i]) for i in range(len(knots) - 1)]
        slopes.append(slopes[-1])
        cache[nd] = (knots, vals, slopes)
        return cache[nd]

    def decode_run(self, t0: float, t_limit: float, nd: int, kvd0: int, steps: int, kvmax0: int
                   ) -> tuple[int, float, float] | None:
        """Closed-form run of up to ``steps`` pure-decode iterations of ``nd`` sequences (mean context
        ``kvd0``, longest ``kvmax0``, both growing by one a step) starting at ``t0``, keeping those that
        start before ``t_limit``: (iterations, start of the last one, end of the last one) in s.

        Within a segment of the profile's kv grid each iteration time is ``A + B j``, so start times are
        ``t0 + j A + B j (j - 1) / 2``: the run costs a few operations per grid segment, not per step.
        None when the profile has no pure-decode rows (use `decode_run_s`)."""
        line = self._decode_line(nd)
        if line is None:
            return None
        knots, vals, slopes = line
        L, alpha = self.shape.num_layers, self.skew_alpha
        delta = kvmax0 - kvd0 if (alpha != 0.0 and nd > 1) else 0
        fixed = self.token_parallel_s(nd) + 1e-6 * sum(self.prof.per_sequence_us(n, nd) for n in self._per_seq)

        def seg(x: float) -> tuple[float, float, float]:
            """value, slope at x and the next knot above x."""
            if x < knots[0]:
                return vals[0], 0.0, knots[0]
            i = bisect.bisect_right(knots, x) - 1
            nxt = knots[i + 1] if i + 1 < len(knots) else float("inf")
            return vals[i] + (x - knots[i]) * slopes[i], slopes[i], nxt

        done, t, x, last_start = 0, t0, float(kvd0), t0
        while done < steps and t < t_limit:
            v1, b1, n1 = seg(x)
            a_us, b_us, m = v1, b1, n1 - x
            if delta:
                # skew blend only where the longest decode is slower (t_max > t_mean): g = t_max - t_mean
                # is linear in the segment; cut the segment where g changes sign
                v2, b2, n2 = seg(x + delta)
                m = min(m, n2 - x - delta)
                g0, gb = v2 - v1, b2 - b1
                if g0 > 0 or (g0 == 0 and gb > 0):
                    a_us, b_us = v1 + alpha * g0, b1 + alpha * gb
                    if gb < 0:  # g > 0 for j < g0 / -gb
                        m = min(m, max(1, math.ceil(g0 / -gb)))
                elif gb > 0:  # g < 0 for j < -g0 / gb
                    m = min(m, max(1, math.ceil(-g0 / gb)))
            A, B = fixed + 1e-6 * L * a_us, 1e-6 * L * b_us
            m = int(min(steps - done, max(1, -(-m // 1))))
            # iterations j < m of this segment start at t + j A + B j (j - 1) / 2: keep those < t_limit
            c, last_start, t = linear_run(t, t_limit, m, A, B)
            x += c
            done += c
            if c < m:
                break
        return done, last_start, t

    def decode_run_s(self, nd: int, kvd0: int, steps: int, kvmax0: int = 0) -> np.ndarray:
        """Times (s) of ``steps`` consecutive pure-decode iterations of ``nd`` sequences whose mean context
        starts at ``kvd0`` (longest ``kvmax0``) and grows by one token per iteration."""
        kvd = np.arange(kvd0, kvd0 + steps, dtype=float)
        t_mean = self.prof.attention.decode_only_np(nd, kvd)
        if self.skew_alpha != 0.0 and nd > 1 and kvmax0 != kvd0:
            t_max = self.prof.attention.decode_only_np(nd, kvd + (kvmax0 - kvd0))
            t_mean = np.where(t_max > t_mean, t_mean + self.skew_alpha * (t_max - t_mean), t_mean)
        att = self.shape.num_layers * t_mean
        fixed = self.token_parallel_s(nd) + 1e-6 * sum(self.prof.per_sequence_us(n, nd) for n in self._per_seq)
        return att * 1e-6 + fixed
