"""The one error class of a run configuration.

`RunConfigError` (a ValueError) is what `hpctwin.run`, `hpctwin.twin.plan.plan` and the command line
raise for a configuration that cannot run: an unknown name (scheduler, placement, allocation, model
section; with a did-you-mean suggestion), a value out of range, an option that does not apply. The
validation layer's `twin.options.ConfigError` and the scheduler table's
`schedulers.registry.UnknownSchedulerError` are subclasses, so callers that catch either keep
working. This module imports nothing: every layer may raise it.
"""
from __future__ import annotations


class RunConfigError(ValueError):
    """A configuration that cannot run (bad option value, unknown name...).

    The message is one line naming the field, with a did-you-mean suggestion where one exists.

    Examples
    --------
    >>> import hpctwin
    >>> try:
    ...     hpctwin.run(hpctwin.RunConfig(placement="frist-fit"))
    ... except hpctwin.RunConfigError as e:
    ...     print(e)
    RunConfig: placement: unknown placement 'frist-fit' (did you mean 'first-fit'?); known: first-fit, ...
    >>> try:
    ...     hpctwin.plan(hpctwin.RunConfig(scheduler="conservativ"))
    ... except hpctwin.RunConfigError as e:
    ...     print(e)
    RunConfig: scheduler: unknown scheduler 'conservativ' (did you mean 'conservative'?); known: fcfs, ...
    >>> issubclass(hpctwin.RunConfigError, ValueError)
    True
    """
