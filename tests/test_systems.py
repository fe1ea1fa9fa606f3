"""Built-in machine files: they load, validate, cite their constants and match the issue's figures."""
from __future__ import annotations

from pathlib import Path

import pytest

from hpctwin.power.chain import Chain
from hpctwin.power.config import parse_cooling, parse_power
from hpctwin.twin.system import builtin_systems, load_system

EXPECTED = {
    "frontier": (9408, 1, 4), "marconi100": (980, 2, 4), "lassen": (792, 2, 4), "fugaku": (158976, 1, 0),
    "adastra": (384, 1, 8), "dgx-h100": (128, 2, 8), "generic": (256, 2, 0),
}


def test_all_expected_systems_present():
    assert set(EXPECTED) <= set(builtin_systems())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_system_loads_and_validates(name):
    s = load_system(name)
    assert (s.nodes, s.cpus_per_node, s.gpus_per_node) == EXPECTED[name]
    assert s.name == name and s.description
    assert s.network == {"preset": name}
    p = parse_power(s.power, nodes=s.nodes, cpus_per_node=s.cpus_per_node, gpus_per_node=s.gpus_per_node, path=s.path)
    c = parse_cooling(s.cooling, path=s.path)
    assert c.backend == "builtin"
    ch = Chain(p)
    assert ch.uniform_breakdown(0, 0)["facility_w"] < ch.uniform_breakdown(1, 1)["facility_w"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_constant_has_a_source_comment(name):
    """Each key = value line of [system], [power] and [cooling] carries a comment (its source),
    except lines covered by a comment block directly above them."""
    lines = Path(load_system(name).path).read_text().splitlines()
    table = None
    prev_comment = False
    for i, line in enumerate(lines, 1):
        st = line.strip()
        if st.startswith("["):
            table = st
            prev_comment = False
            continue
        if st.startswith("#"):
            prev_comment = True
            continue
        if not st:
            prev_comment = False
            continue
        if table in ("[system]", "[power]", "[cooling]") and "=" in st and not st.startswith(("name", "description", "backend")):
            assert "#" in st or prev_comment, f"{name}.toml line {i} has no source comment: {st}"


def test_dgx_h100_node_max_input_is_datasheet_10_2_kw():
    s = load_system("dgx-h100")
    p = parse_power(s.power, nodes=s.nodes, cpus_per_node=2, gpus_per_node=8, path=s.path)
    assert Chain(p).node_input_w(p.node_max_w) == pytest.approx(10200.0)


def test_fugaku_peak_matches_top500_hpl_power():
    s = load_system("fugaku")
    p = parse_power(s.power, nodes=s.nodes, cpus_per_node=1, gpus_per_node=0, path=s.path)
    assert Chain(p).uniform_breakdown(1, 1)["facility_w"] == pytest.approx(29.899e6, rel=1e-3)
