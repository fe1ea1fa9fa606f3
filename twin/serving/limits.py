"""Limits and value checks shared by every serving input (bundles, profiles, ``hpctwin serve`` flags,
``--set serving.KEY``): one place for the bounds and for the wording of the refusals.

Every check takes a ``label`` naming where the value came from (``config.json: nodes[0].instances[1].tp_size``,
``--max-num-seqs``, ``--set: serving.interval_s``) and raises ``error`` (a ValueError subclass the caller
chooses) with a one-line message: the label, the value, what is wrong and what to give instead.

The bounds are set at least 100 times beyond the largest value any experiment, test or data set of the
repository uses (in brackets), so that no valid run is refused; they exist so that a typo or a unit slip
is refused up front instead of running for hours or allocating more memory than the machine has.
docs/serving.md ("Input checks and limits") lists them.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

from hpctwin.twin.schema import shown_value

#: instances of one deployment [9 in the tests; 6 in experiments/serving_cluster.py]
MAX_INSTANCES = 10_000
#: tensor-parallel degree of one instance [2]
MAX_TP = 1024
#: vLLM max_num_seqs [256]
MAX_NUM_SEQS = 1_000_000
#: vLLM max_num_batched_tokens (the token budget of one iteration) [8,192]
MAX_BATCHED_TOKENS = 100_000_000
#: KV block size, tokens [16]
MAX_BLOCK_SIZE = 4096
#: KV blocks of one instance: the block manager keeps per-block bookkeeping (about 100 bytes a block with
#: prefix caching), so 10^7 blocks is about 1 GiB [40,000: RTX PRO 6000, Llama-3.1-8B, block 16]
MAX_KV_BLOCKS = 10_000_000
#: GPU memory of one device, GiB (LLMServingSim's npu_mem.mem_size) [96]
MAX_GPU_MEM_GIB = 10_240.0
#: bandwidths in GB/s (links, memory, weight loading) [1,792 GB/s HBM; 900 GB/s NVLink]
MAX_GBPS = 200_000.0
#: link latency, ns (LLMServingSim's link_latency) [20,000 ns]
MAX_LATENCY_NS = 1e9
#: node-request jobs (held rows) of a serving deployment on the batch machine [112 by default at 6 instances]
MAX_SLOTS = 1_000_000
#: controller ticks of a serving run on the batch machine: (trace span x time_scale + cold start) /
#: interval_s [5,760: a day at the HPA's 15 s]
MAX_TICKS = 10_000_000
#: cold start of one instance, s (startup_s + weights / load_GBps) [30 s + 64 GB at 7 GB/s = 39 s]
MAX_COLD_START_S = 86_400.0
#: clock values (start_s, lease_s, ...), s: about 317 years
MAX_CLOCK_S = 1e10


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() and 1000 <= abs(v) < 1e15 else f"{v:g}"


def check_int(v: object, label: str, error: type[Exception] = ValueError, *, lo: int = 0,
              hi: int | None = None, what: str = "") -> int:
    """``v`` as an int: a whole number (not a bool, not a float such as 10.7 or 12.0, not a string such as
    "12") in ``[lo, hi]``; ``what`` names the unit in the message (``tokens``, ``instances``)."""
    unit = f" {what}" if what else ""
    if isinstance(v, bool) or not isinstance(v, Integral):
        raise error(f"{label}: {shown_value(v)} is not a whole number; give an integer number{unit} >= {lo}")
    v = int(v)
    if v < lo:
        raise error(f"{label}: {v} is below {lo}; give an integer number{unit} >= {lo}")
    if hi is not None and v > hi:
        raise error(f"{label}: {v:,} is more than the limit of {hi:,}{unit} (docs/serving.md, Input checks "
                    "and limits)")
    return v


def check_number(v: object, label: str, error: type[Exception] = ValueError, *, lo: float = 0.0,
                 hi: float | None = None, lo_open: bool = False, unit: str = "", hint: str = "") -> float:
    """``v`` as a float: a finite number (not a bool, not a string) in ``[lo, hi]`` (``(lo, hi]`` with
    ``lo_open``); ``unit`` is named in the message; ``hint`` is added to the message of a value above ``hi``
    (the likely unit mistake)."""
    u = f" {unit}" if unit else ""
    rel = ">" if lo_open else ">="
    if isinstance(v, bool) or not isinstance(v, Real):
        raise error(f"{label}: {shown_value(v)} is not a number; "
                    f"give a finite number of{u or ' units'} {rel} {_fmt(lo)}")
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise error(f"{label}: {shown_value(f)} is not a finite number; give a finite number of{u or ' units'} {rel} "
                    f"{_fmt(lo)}")
    if f < lo or (lo_open and f == lo):
        raise error(f"{label}: {_fmt(f)} must be {rel} {_fmt(lo)}{u}")
    if hi is not None and f > hi:
        raise error(f"{label}: {_fmt(f)}{u} is more than the plausible limit of {_fmt(hi)}{u}"
                    + (f"; {hint}" if hint else " (docs/serving.md, Input checks and limits)"))
    return f


def check_fraction(v: object, label: str, error: type[Exception] = ValueError) -> float:
    """A fraction in (0, 1]; a percentage (1 < v <= 100) is refused with the fraction it likely means."""
    try:
        f = float(v) if isinstance(v, Real) and not isinstance(v, bool) else math.nan
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise error(f"{label}: {shown_value(v)} is not a fraction; give a number in (0, 1] (e.g. 0.9)")
    if 1 < f <= 100:
        raise error(f"{label}: {_fmt(f)}: a fraction in (0, 1] is expected; did you mean {f / 100:.2f}?")
    if not 0 < f <= 1:
        raise error(f"{label}: {_fmt(f)}: a fraction in (0, 1] is expected (e.g. 0.9)")
    return f


def check_bool(v: object, label: str, error: type[Exception] = ValueError) -> bool:
    """``v`` when it is true or false (a string "false" or a number is refused: it would read as true)."""
    if not isinstance(v, bool):
        raise error(f"{label}: {shown_value(v)} is not true or false")
    return v


def check_str(v: object, label: str, error: type[Exception] = ValueError) -> str:
    """``v`` when it is a non-empty string."""
    if not isinstance(v, str) or not v.strip():
        raise error(f"{label}: {shown_value(v)} is not a non-empty string")
    return v


def check_bytes(v: object, label: str, error: type[Exception] = ValueError, *, lo: int = 1 << 20) -> int:
    """A size in bytes (a whole number >= ``lo``, 1 MiB by default): a smaller value most likely is MiB
    or GiB written where bytes are meant, and is refused naming that."""
    if isinstance(v, bool) or not isinstance(v, Integral):
        raise error(f"{label}: {shown_value(v)} is not a whole number of bytes")
    n = int(v)
    if n < lo:
        unit = "GiB" if 0 < n < 4096 else "MiB"
        raise error(f"{label}: {n:,} bytes is below {lo:,} bytes (1 MiB); looks like {unit}; give bytes"
                    + (f" ({n * (1 << (30 if unit == 'GiB' else 20)):,})" if n > 0 else ""))
    return n


def check_ticks(span_s: float, interval_s: float, label: str, error: type[Exception] = ValueError,
                what: str = "") -> None:
    """Refuse a controller period that would need more than `MAX_TICKS` ticks over ``span_s`` seconds."""
    ticks = span_s / interval_s
    if ticks > MAX_TICKS:
        raise error(f"{label}: {_fmt(interval_s)} s over {what or f'{_fmt(span_s)} s'} is {ticks:.3g} controller "
                    f"ticks, more than {MAX_TICKS:,}; give an interval of at least {span_s / MAX_TICKS:.3g} s")


# ---------------------------------------------------------------------- command-line option types
def arg_int(lo: int, hi: int, what: str):
    """An argparse ``type=`` for an integer option in ``[lo, hi]`` (argparse reports the message, exit 2)."""
    import argparse  # noqa: PLC0415

    def integer(text: str) -> int:
        t = text.strip()
        if not (t.lstrip("-").isascii() and t.lstrip("-").isdigit()):
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give an integer number of {what} "
                                             f"in [{lo}, {hi:,}]")
        v = int(t)
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} {what}: give an integer in [{lo}, {hi:,}]")
        return v
    integer.__name__ = what
    return integer


def arg_number(lo: float, hi: float, unit: str, lo_open: bool = True):
    """An argparse ``type=`` for a finite number in ``(lo, hi]`` (``[lo, hi]`` without ``lo_open``)."""
    import argparse  # noqa: PLC0415

    def number(text: str) -> float:
        try:
            return check_number(float(text), "", argparse.ArgumentTypeError, lo=lo, hi=hi, lo_open=lo_open,
                                unit=unit)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a finite number of {unit}") from None
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix(": ")) from None
    number.__name__ = unit
    return number


def arg_dir(text: str) -> str:
    """An argparse ``type=`` for an existing directory."""
    import argparse  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such directory" if not Path(text).exists()
                                         else f"{text}: not a directory")
    return text
