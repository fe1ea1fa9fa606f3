"""Held jobs: node-request rows a serving deployment submits at run time (`twin.serving.batch`).

The mechanism is a hook of the model contract, defined in `twin.held` (the run calls it for any model
that declares ``held_jobs``, without knowing serving); its functions are re-exported here for the
serving code and its tests.
"""
from __future__ import annotations

from hpctwin.twin.held import attach_held, concat_workloads, trim_held

__all__ = ["attach_held", "concat_workloads", "trim_held"]
