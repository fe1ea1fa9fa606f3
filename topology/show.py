"""``hpctwin topology show SYSTEM``: print a machine's interconnect and optionally draw it.

SYSTEM is a built-in system name or a system TOML file (its ``[network]`` table is used), or a
preset name of `topology.presets.PRESETS`. Prints hosts, switches, links (cables) by kind with
their bandwidth, and a bisection estimate: the groups are split into two halves by group id (first
half of the group ids vs the rest) and the estimate is the smaller of the two halves' total
bandwidth on links leaving the half (bytes/s, one direction). ``--png FILE`` draws the topology if it
has at most 600 nodes, else a small instance of the same family (said so on the figure).
"""
from __future__ import annotations

import argparse
import sys

import networkx as nx
import numpy as np

from hpctwin.topology.dragonfly import TopologyError
from hpctwin.topology.presets import PRESETS, build_network, build_preset

DRAW_LIMIT = 600

#: small instances of each family for drawings of large machines
SMALL = {
    "dragonfly": {"kind": "dragonfly", "p": 2, "a": 4, "h": 2, "g": 9},
    "dragonfly_plus": {"kind": "dragonfly_plus", "groups": 5, "leaves": 3, "spines": 2, "hosts_per_leaf": 2,
                       "global_per_spine": 2},
    "fat_tree": {"kind": "fat_tree", "k": 4},
    "leaf_spine": {"kind": "leaf_spine", "hosts_per_leaf": 4, "spines": 4},
    "torus": {"kind": "torus", "dims": [4, 4, 2], "block": [2, 2, 2]},
}


def load_network(name: str) -> tuple[nx.Graph, str]:
    """Graph and a label for a system name/path or a preset name."""
    try:
        from hpctwin.twin.system import load_system  # noqa: PLC0415
        spec = load_system(name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        if not spec.network:
            raise TopologyError(f"system {spec.name} ({spec.path}) has no [network] table")
        return build_network(spec.network, spec.nodes, source=f"{spec.path} [network]"), f"system {spec.name}"
    if name in PRESETS:
        return build_preset(name, None if PRESETS[name]["nodes"] else 256), f"preset {name}"
    raise TopologyError(f"unknown system or preset {name!r}; presets: {', '.join(sorted(PRESETS))}")


def describe(G: nx.Graph) -> dict:
    """Counts and bandwidths of a topology graph (bytes/s)."""
    kinds = nx.get_node_attributes(G, "kind")
    hosts = sum(1 for k in kinds.values() if k == "host")
    switches = sum(1 for k in kinds.values() if k == "switch")
    groups = nx.get_node_attributes(G, "group")
    host_groups = np.array([groups[n] for n, k in kinds.items() if k == "host"])
    ng = int(host_groups.max()) + 1 if len(host_groups) else 0
    half = ng // 2 if ng > 1 else 0
    links: dict[str, list] = {}
    out_a = out_b = 0.0
    for u, v, d in G.edges(data=True):
        rec = links.setdefault(d["kind"], [0, 0.0, set()])
        rec[0] += d.get("links", 1)
        rec[1] += d["bandwidth"]
        rec[2].add(d["bandwidth"] / d.get("links", 1))
        gu, gv = groups.get(u, -1), groups.get(v, -1)
        if half and gu != gv:
            ina, inb = (gu >= 0 and gu < half, gu >= half), (gv >= 0 and gv < half, gv >= half)
            if ina[0] != inb[0]:
                out_a += d["bandwidth"] if (ina[0] or inb[0]) else 0.0
            if ina[1] != inb[1]:
                out_b += d["bandwidth"] if (ina[1] or inb[1]) else 0.0
    return {"topology": dict(G.graph.get("topology", {})), "hosts": hosts, "switches": switches, "groups": ng,
            "links": {k: {"cables": v[0], "total_bandwidth": v[1], "bandwidth_per_cable": sorted(v[2])}
                      for k, v in links.items()},
            "bisection_bandwidth": min(out_a, out_b) if half else float("nan")}


def draw(G: nx.Graph, path: str, title: str) -> None:
    """Write a PNG drawing of ``G`` (hosts small grey, switches coloured by group)."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    kinds = nx.get_node_attributes(G, "kind")
    switches = [n for n, k in kinds.items() if k == "switch"]
    try:
        pos = nx.kamada_kawai_layout(G.subgraph(switches)) if len(switches) > 1 else {s: (0, 0) for s in switches}
    except Exception:  # noqa: BLE001  # pragma: no cover - layout fallback
        pos = nx.spring_layout(G.subgraph(switches), seed=0)
    rng = np.random.default_rng(0)
    for n, k in kinds.items():
        if k == "host":
            sw = G.nodes[n].get("switch")
            x, y = pos.get(sw, (0.0, 0.0))
            pos[n] = (x + rng.normal(0, 0.04), y + rng.normal(0, 0.04))
    fig, ax = plt.subplots(figsize=(8, 8))
    colors = {"terminal": "#cccccc", "local": "#1f77b4", "global": "#d62728"}
    for kind, col in colors.items():
        es = [(u, v) for u, v, d in G.edges(data=True) if d["kind"] == kind]
        nx.draw_networkx_edges(G, pos, edgelist=es, edge_color=col, width=0.6 if kind == "terminal" else 1.0,
                               ax=ax, label=kind)
    grp = [G.nodes[s].get("group", -1) for s in switches]
    nx.draw_networkx_nodes(G, pos, nodelist=switches, node_color=grp, cmap="tab20", node_size=60, ax=ax)
    hosts = [n for n, k in kinds.items() if k == "host"]
    nx.draw_networkx_nodes(G, pos, nodelist=hosts, node_color="#555555", node_size=8, ax=ax)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_axis_off()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def _fmt_bw(b: float) -> str:
    return f"{b / 1e9:,.1f} GB/s ({b * 8 / 1e9:,.0f} Gb/s)"


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``hpctwin topology``; returns the exit status."""
    ap = argparse.ArgumentParser(prog="hpctwin topology", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="action")
    sp = sub.add_parser("show", help="print a machine's interconnect (hosts, switches, links, bisection)")
    sp.add_argument("system", help="built-in system name, system .toml file, or preset name")
    sp.add_argument("--png", default=None, help="write a drawing of the topology (or a small instance) to this PNG")
    a = ap.parse_args(argv)
    if a.action != "show":
        ap.print_help()
        return 2
    try:
        G, label = load_network(a.system)
    except TopologyError as e:
        print(f"hpctwin topology: error: {e}", file=sys.stderr)
        return 2
    info = describe(G)
    t = info["topology"]
    params = ", ".join(f"{k}={v}" for k, v in t.items()
                       if not k.endswith("bandwidth") and k not in ("hosts", "switches"))
    print(f"{label}: {params}")
    print(f"hosts: {info['hosts']:,}   switches: {info['switches']:,}   groups: {info['groups']:,}")
    for kind in ("terminal", "local", "global"):
        if kind in info["links"]:
            rec = info["links"][kind]
            per = ", ".join(_fmt_bw(b) for b in rec["bandwidth_per_cable"])
            print(f"  {kind:<8} links: {rec['cables']:>9,}  at {per} each")
    if np.isfinite(info["bisection_bandwidth"]):
        print(f"bisection estimate (groups split in two halves by id): {_fmt_bw(info['bisection_bandwidth'])}")
    if a.png:
        if G.number_of_nodes() <= DRAW_LIMIT:
            draw(G, a.png, f"{label}")
        else:
            small = build_network(dict(SMALL[t["kind"]]), None if t["kind"] != "leaf_spine" else 16)
            draw(small, a.png, f"small instance of the {t['kind']} family (the machine has "
                               f"{info['hosts']:,} hosts, {info['switches']:,} switches): "
                               + ", ".join(f"{k}={v}" for k, v in SMALL[t['kind']].items() if k != 'kind'))
        print(f"wrote {a.png}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
