"""Instance scheduling policies as a table (``SCHEDULING``), and the SLO set-up of a deployment in any mode.

An instance orders its waiting queue (and chooses whom to preempt) by its scheduling policy, an entry of
`SCHEDULING` (a `plugins.ServingTable`): ``fcfs`` (vLLM's default, the engine's default), ``priority``
(vLLM's priority policy: waiting ordered by (class, arrival), preemption takes the lowest priority) and
``slack`` (`slo.SlackPolicy`: deadline slack from the instance's own latency model, with admission
control ``none``/``defer``/``shed``; options `SlackOptions`). An entry's factory takes its options and
returns ``apply(instance, classes)``, which sets the policy on a freshly built instance; the same
instance configuration as ``Instance(policy=..., slo=..., admission=...)``.

`SLOSetup` is what a deployment needs for multi-SLO serving in every mode (colocated `cluster.simulate`,
P/D `pd.simulate_pd`, autoscaled `autoscale.simulate_autoscaled`, on the batch machine
`batch.ServingBatchModel` in both forms): the classes (`slo.SLOClass`), the seed of the class draw
(`slo.assign_classes`: a trace's own classes are kept), the scheduling policy and its options. It
classes a trace (`SLOSetup.classify`), configures instances (`SLOSetup.configure`, or
`SLOSetup.factory` around a ``make(iid) -> Instance``) and reports per class (`slo.class_report`). In a
P/D deployment the same policy runs in both pools: a prefill instance orders its prompts by TTFT slack
(no token yet: deadline = arrival + TTFT target), a decode instance its requests by TPOT slack (after
the k-th token: first + k x TPOT target); the routers of each pool are chosen apart (``slo_aware`` picks
by predicted TTFT in the front pool, by predicted TPOT in the decode pool).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from hpctwin.twin.plugins import option

from .plugins import ServingTable
from .routers import ROUTERS
from .slo import DEFAULT_CLASSES, SLOClass, SlackPolicy, assign_classes, check_classes, class_report, parse_classes

__all__ = ["SCHEDULING", "SlackOptions", "SLOSetup"]


@dataclass(frozen=True)
class SlackOptions:
    """``slack``: deadline-slack ordering (`slo.SlackPolicy`)."""
    admission: str = option("none", choices=("none", "defer", "shed"),
                            help="requests that can no longer meet their deadline: none (slack order only), "
                                 "defer (behind all that can), shed (dropped before their first token, reported)")
    min_chunk: int = option(512, unit="tokens", minimum=1, maximum=100_000,
                            help="fewest prompt tokens an iteration carries past its decodes when decodes are due")


def _fcfs() -> Callable:
    def apply(x, classes=None) -> None:
        x.priority, x.slack, x.reorder = False, None, False
        x.slo = tuple(classes) if classes else None        # what the slo_aware router reads
    return apply


def _priority() -> Callable:
    def apply(x, classes=None) -> None:
        x.priority, x.slack, x.reorder = True, None, True
        x.slo = tuple(classes) if classes else None
    return apply


def _slack(admission: str = "none", min_chunk: int = 512) -> Callable:
    def apply(x, classes=None) -> None:
        x.priority, x.reorder = False, True
        x.slack = SlackPolicy(x, classes, admission)
        x.slack.min_chunk = min_chunk
    return apply


#: instance scheduling policies: name -> factory(**options) -> ``apply(instance, classes)``; tag ``classes``:
#: the policy reads the requests' SLO classes
SCHEDULING = ServingTable("scheduling policy")
SCHEDULING.register("fcfs", _fcfs, help="vLLM's default: first come, first served; preemption takes the last admitted",
                    tags={"classes": False})
SCHEDULING.register("priority", _priority, tags={"classes": True},
                    help="vLLM's priority policy: waiting ordered by (class, arrival); preemption takes the "
                         "lowest-priority, latest request")
SCHEDULING.register("slack", _slack, spec=SlackOptions, tags={"classes": True},
                    help="deadline slack from the instance's own latency model, least first (prefill: TTFT, "
                         "decode: TPOT deadlines); KV short: the most slack is preempted; admission control")


@dataclass(frozen=True)
class SLOSetup:
    """Multi-SLO serving of one deployment (module docstring): ``classes`` (None: single-SLO serving, no
    per-class figures), ``seed`` of the class draw, the scheduling policy ``scheduling`` and its
    ``options`` (checked against its entry, defaults filled)."""

    classes: tuple[SLOClass, ...] | None = None
    seed: int = 0
    scheduling: str = "fcfs"
    options: tuple = ()

    def __post_init__(self) -> None:
        if self.classes is not None:
            object.__setattr__(self, "classes", check_classes(self.classes))
        opts = SCHEDULING.options_of(self.scheduling, dict(self.options))
        object.__setattr__(self, "options", tuple(sorted(opts.items())))

    @classmethod
    def from_text(cls, scheduling: str = "fcfs", classes: str = "", seed: int = 0, label: str = "--scheduling",
                  classes_label: str = "--slo-classes", extra: dict | None = None) -> "SLOSetup":
        """From the texts of the command line or the ``serving`` options: ``scheduling`` is ``NAME`` or
        ``NAME:KEY=VALUE,...`` (`plugins.ServingTable.from_text`), ``classes`` ``""`` (default classes
        when the policy reads classes, else none), ``default`` or ``NAME:TTFT_S:TPOT_S:SHARE,...``
        (`slo.parse_classes`); ``extra``: options given by their own switches."""
        name, opts = SCHEDULING.from_text(scheduling, label)
        opts.update(extra or {})
        cl = parse_classes(classes, classes_label) if classes else None
        if cl is None and SCHEDULING.entry(name).tag("classes"):
            cl = DEFAULT_CLASSES
        return cls(cl, seed, name, tuple(opts.items()))

    @property
    def default(self) -> bool:
        """Single-SLO FCFS serving: the engine as it was (nothing is changed on instances or requests)."""
        return self.classes is None and self.scheduling == "fcfs"

    def with_router(self, router: str) -> "SLOSetup":
        """Classes are on (default ones) when ``router`` reads them (the ``slo_aware`` router's deadlines)."""
        if self.classes is None and ROUTERS.entry(router).tag("classes"):
            return replace(self, classes=DEFAULT_CLASSES)
        return self

    def classify(self, trace: Sequence) -> list:
        """``trace`` with each request's class (`slo.assign_classes`; unchanged without classes)."""
        if self.classes is None:
            return list(trace)
        return assign_classes(trace, self.classes, self.seed)

    def configure(self, instances: Sequence) -> None:
        """Set the scheduling policy on fresh ``instances`` (nothing for the default set-up)."""
        if self.default:
            return
        apply = SCHEDULING.make(self.scheduling, **dict(self.options))
        for x in instances:
            apply(x, self.classes)

    def factory(self, make: Callable[[int], Any]) -> Callable[[int], Any]:
        """``make`` (``iid -> Instance``) with the scheduling policy set on each instance it builds."""
        if self.default:
            return make

        def built(iid: int) -> Any:
            x = make(iid)
            self.configure([x])
            return x
        return built

    def report(self, reqs: Sequence, arrival: Sequence[float] | None = None, window_s: float | None = None) -> dict:
        """The ``slo_classes`` block of a summary (`slo.class_report`), or {} without classes."""
        if self.classes is None:
            return {}
        return {"slo_classes": {"scheduling": self.scheduling, **({"options": dict(self.options)} if self.options
                                                                     else {}),
                                "seed": self.seed, "classes": class_report(reqs, self.classes, arrival, window_s)}}


def class_rows(block: dict | None) -> list[tuple[str, str]]:
    """(label, text) rows of a ``slo_classes`` summary block (`SLOSetup.report`) for a printed summary:
    one a class with its requests, attainment (%), shed, and TTFT/TPOT P50/P99 (s); none without it."""
    if not isinstance(block, dict) or not isinstance(block.get("classes"), dict):
        return []
    opts = ", ".join(f"{k}={v}" for k, v in (block.get("options") or {}).items())
    rows = [("SLO classes", f"scheduling {block.get('scheduling')}{': ' + opts if opts else ''}")]
    nan = float("nan")
    for name, c in block["classes"].items():
        att = c.get("attainment")
        pct = f"{100 * att:.2f} %" if isinstance(att, float) and att == att else "n/a"
        ttft, tpot = c.get("ttft") or {}, c.get("tpot") or {}
        rows.append((f"  {name}", f"{c.get('requests', 0):,} requests, attainment {pct} (TTFT <= "
                                  f"{c.get('ttft_target_s', nan):g} s, TPOT <= {c.get('tpot_target_s', nan):g} s), "
                                  f"{c.get('shed', 0):,} shed; TTFT p50 {ttft.get('median', nan):.4f} s "
                                  f"p99 {ttft.get('p99', nan):.4f} s; TPOT p50 {tpot.get('median', nan):.4f} s "
                                  f"p99 {tpot.get('p99', nan):.4f} s"))
    return rows
