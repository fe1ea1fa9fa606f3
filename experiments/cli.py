"""The one option vocabulary of the experiment scripts (documented once in ``docs/experiments.md``).

Every script builds its parser with `parser` (help shows each option's default) and adds the shared
options with the functions below, so ``--workload/-w``, ``--system``, ``--max-jobs``/``--skip-jobs``,
``--out``, ``--force``, ``--seed``, ``--workers`` and ``--data-dir`` read and behave the same in every
script and in ``hpctwin run``:

* ``--workload/-w W``: a registry name, a log file or ``synthetic:...``; repeatable and/or a comma list
  where the script compares several workloads (``-w KTH-SP2 -w CTC-SP2`` = ``-w KTH-SP2,CTC-SP2``; the
  ``k=v`` items of ``synthetic:jobs=60,nodes=128`` stay with their workload);
  a script built around one workload refuses a second with a one-line error;
* ``--system S``: a built-in machine or a system TOML; several the same way where the script
  compares machines;
* ``--max-jobs N`` / ``--skip-jobs K``: the job window, jobs K+1 .. K+N of each workload in submit
  order (`twin.run.job_window`, the same as ``hpctwin run``);
* ``--out DIR`` / ``--force``: the output folder contract (`experiments.tables.staged_output`);
* ``--seed K``, ``--workers N``, ``--data-dir DIR``.

Old spellings (``--log``, ``--logs``, ``--systems``, ``--jobs``, ``--traces``) still work as hidden
aliases that print one deprecation line on stderr (``PROG: note: --logs is deprecated; use ...``).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hpctwin.twin.argtypes import whole_number

from .tables import FORCE_HELP, OUT_RULE

WORKLOAD_HELP = ("a registry name (hpctwin datasets list), a log file (SWF, sacct, ...) or "
                 "'synthetic:jobs=N,nodes=M,...'")


class Defaults(list):
    """A list default that prints as ``a,b`` in ``--help`` and is replaced (not extended) when given."""

    def __str__(self) -> str:
        return ",".join(str(x) for x in self)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``(default: X)`` after every option's help (none for flags and for options without a default)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if "%(default)" in text or "(default" in text or d is None or d is False or d == argparse.SUPPRESS \
                or not action.option_strings:
            return text
        return text + " (default: %(default)s)"


#: the last parser `parser` built (the tests read its options)
last_parser: argparse.ArgumentParser | None = None


def parser(module: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of ``python -m hpctwin.experiments.<module>``: the docstring's first paragraph as
    description, defaults shown in ``--help``."""
    global last_parser
    desc = (doc or "").strip().split("\n\n")[0]
    last_parser = argparse.ArgumentParser(prog=f"python -m hpctwin.experiments.{module}", description=desc,
                                          formatter_class=HelpFormatter)
    return last_parser


def _split(values: Sequence[str]) -> list[str]:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]`` (blank items dropped). A ``key=value`` piece without a
    ``:`` belongs to the item before it: ``synthetic:jobs=60,nodes=128,KTH-SP2`` is two workloads,
    ``synthetic:jobs=60,nodes=128`` and ``KTH-SP2``."""
    out: list[str] = []
    for x in values:
        for v in str(x).split(","):
            v = v.strip()
            if not v:
                continue
            if out and "=" in v and ":" not in v and ":" in out[-1]:
                out[-1] += "," + v
            else:
                out.append(v)
    return out


class _ListAction(argparse.Action):
    """Collects comma lists and repeated uses into one list; the first use replaces the default.

    ``several=False``: the destination is one value and a second one is an error. ``alias``: an old
    spelling, which prints a one-line deprecation note first."""

    def __init__(self, option_strings, dest, several: bool = True, new: str = "", alias: bool = False, **kw):
        self.several, self.new, self.alias = several, new, alias
        super().__init__(option_strings, dest, **kw)

    def __call__(self, ap, namespace, values, option_string=None):
        if self.alias:
            print(f"{ap.prog}: note: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        items = _split(values if isinstance(values, list) else [values])
        if not items:
            ap.error(f"{option_string}: expected a value")
        cur = getattr(namespace, self.dest, None)
        if self.several:
            have = [] if isinstance(cur, Defaults) or cur is None else list(cur)
            setattr(namespace, self.dest, have + items)
            return
        given = getattr(namespace, f"_{self.dest}_given", False)
        if given or len(items) > 1:
            got = ([cur] if given else []) + items
            ap.error(f"{self.new}: this script takes one value, got {len(got)} ({', '.join(map(str, got))}); "
                     "run it once per value")
        setattr(namespace, f"_{self.dest}_given", True)
        setattr(namespace, self.dest, items[0])


def _list_option(ap: argparse.ArgumentParser, flags: Sequence[str], dest: str, default, help_text: str,
                 several: bool, aliases: Sequence[str], metavar: str) -> None:
    new = "/".join(flags)
    d = Defaults(default) if several and default is not None else default
    ap.add_argument(*flags, dest=dest, action=_ListAction, several=several, new=new, default=d,
                    nargs="+" if several else None, metavar=metavar, help=help_text)
    for old in aliases:
        ap.add_argument(old, dest=dest, action=_ListAction, several=several, new=new, alias=True,
                        nargs="+" if several else None, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def add_workload(ap: argparse.ArgumentParser, default, *, several: bool = True,
                 aliases: Sequence[str] = ("--log", "--logs"), help_text: str | None = None) -> None:
    """``--workload/-w`` (dest ``workload``: a list when ``several``, else one string)."""
    what = help_text or WORKLOAD_HELP
    what += "; several: repeat -w or give a comma list" if several else "; one workload"
    _list_option(ap, ("--workload", "-w"), "workload", default, what, several, aliases, "W")


def add_system(ap: argparse.ArgumentParser, default, *, several: bool = True,
               aliases: Sequence[str] = ("--systems",), help_text: str | None = None) -> None:
    """``--system`` (dest ``system``: a list when ``several``, else one string)."""
    what = help_text or "a built-in machine (hpctwin systems) or a system .toml file"
    what += "; several: repeat --system or give a comma list" if several else ""
    _list_option(ap, ("--system",), "system", default, what, several, aliases, "S")


#: argparse types: a whole number >= 1 / >= 0 (the run command's own, `twin.argtypes.whole_number`)
positive_int = whole_number(1)
non_negative_int = whole_number(0)


def add_job_window(ap: argparse.ArgumentParser, *, aliases: Sequence[str] = ()) -> None:
    """``--max-jobs N`` and ``--skip-jobs K`` (dests ``max_jobs``, ``skip_jobs``; None = not given)."""
    ap.add_argument("--max-jobs", type=positive_int, default=None, metavar="N",
                    help="only the first N jobs of each workload in submit order, after --skip-jobs "
                         "(default: all)")
    ap.add_argument("--skip-jobs", type=non_negative_int, default=None, metavar="K",
                    help="leave out the first K jobs of each workload in submit order (default: none)")
    for old in aliases:
        ap.add_argument(old, dest="max_jobs", type=positive_int, action=_DeprecatedStore, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)


class _DeprecatedStore(argparse.Action):
    """An old spelling of a one-value option: stores the value after a one-line note."""

    def __call__(self, ap, namespace, values, option_string=None):
        print(f"{ap.prog}: note: {option_string} is deprecated; use --{self.dest.replace('_', '-')}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_out(ap: argparse.ArgumentParser, default: str, what: str = "output folder") -> None:
    """``--out`` and ``--force`` (the output folder contract of `tables.staged_output`)."""
    ap.add_argument("--out", "-o", default=default, metavar="DIR", help=f"{what}; {OUT_RULE}")
    ap.add_argument("--force", action="store_true", help=FORCE_HELP)


def add_seed(ap: argparse.ArgumentParser, help_text: str = "seed of every random source of the runs") -> None:
    ap.add_argument("--seed", type=int, default=0, metavar="K", help=help_text)


def add_workers(ap: argparse.ArgumentParser, default: int = 1) -> None:
    ap.add_argument("--workers", type=positive_int, default=default, metavar="N",
                    help="runs in N processes (results identical and in the same order whatever N is)")


def add_data_dir(ap: argparse.ArgumentParser, help_text: str | None = None) -> None:
    if help_text is None:
        from hpctwin.datasets.registry import DATA_DIR_HELP  # noqa: PLC0415
        help_text = DATA_DIR_HELP
    ap.add_argument("--data-dir", default=None, metavar="DIR", help=help_text)


def window_text(max_jobs: int | None, skip_jobs: int | None) -> str:
    """How a caption states the job window ("" for whole workloads)."""
    if not max_jobs and not skip_jobs:
        return ""
    k = skip_jobs or 0
    if max_jobs:
        return f"jobs {k + 1}-{k + max_jobs} in submit order"
    return f"all jobs after the first {k} in submit order"
