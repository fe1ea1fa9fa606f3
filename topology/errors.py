"""The topology package's error type, in a module of its own so that reading a ``[network]`` table
(`topology.presets.network_params`, `node_groups`) does not import the graph builders and networkx."""
from __future__ import annotations


class TopologyError(ValueError):
    """Impossible topology parameters or a system file that disagrees with its topology.

    Shared by every builder of the ``topology`` package.
    """
