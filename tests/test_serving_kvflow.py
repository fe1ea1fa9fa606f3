"""KV transfers of disaggregated serving as flows on a topology: hand-computed times, sharing, NVLink,
placement, conservation, and no decode before the KV has arrived."""
from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from hpctwin.datasets.serving_traces import ServingRequest
from hpctwin.topology.fattree import leaf_spine_graph
from hpctwin.topology.routing import make_router
from hpctwin.twin.serving import BlockManager, Instance, IterationModel, LayerProfile
from hpctwin.twin.serving.kvflow import FlowSet, KVNetwork, KVNetworkError, place_instances
from hpctwin.twin.serving.pd import simulate_pd

from tests.test_serving import TINY, D, write_profile

KV_PER_TOKEN = 2 * 2 * 16 * 1 * 2   # K+V x kv heads x head_dim x layers x bf16 bytes (TINY): 128 B
TERM, GLOB = 1e6, 0.5e6             # B/s per direction: the leaf-spine links are the bottleneck
LAT_T, LAT_G = 1e-3, 2e-3           # s per hop
PATH_LAT = 2 * LAT_T + 2 * LAT_G    # host -> leaf -> spine -> leaf -> host


@pytest.fixture
def model(tmp_path):
    return IterationModel(TINY, LayerProfile.load(write_profile(tmp_path / "p")))


def inst(model, iid, blocks=200, bs=4, budget=512, seqs=8):
    return Instance(iid, model, BlockManager(blocks, bs), seqs, budget)


def two_switch_net(placement: list[int], gpus_per_node: int = 1, d2d_Bps: float = 4e6, d2d_lat: float = 1e-4,
                   hosts: int = 3) -> KVNetwork:
    """``hosts`` hosts, one per leaf switch, every leaf linked to one spine (a two-level tree)."""
    G = leaf_spine_graph(hosts, hosts_per_leaf=1, spines=1, terminal_bandwidth=TERM, global_bandwidth=GLOB,
                         terminal_latency=LAT_T, global_latency=LAT_G)
    return KVNetwork(make_router(G), G, [(k, 1, n) for k, n in enumerate(placement)], gpus_per_node, d2d_Bps,
                     d2d_lat, name="two-switch")


def test_one_flow_is_size_over_bottleneck_plus_latency(model):
    p, d = inst(model, 0), inst(model, 1)
    res = simulate_pd([ServingRequest(0.0, 100, 3)], [p], [d], kv_network=two_switch_net([0, 1]))
    r = res.requests[0]
    x = 100 * KV_PER_TOKEN / GLOB + PATH_LAT    # 12,800 B at 0.5 MB/s + 6 ms
    assert r.first == pytest.approx(D)
    assert r.ready == pytest.approx(D + x)
    assert r.last == pytest.approx(D + x + 2 * D)
    assert r.prefill_instance == 0 and r.instance == 1
    kv = res.extra["kv_network"]
    assert kv["transfers"] == 1 and kv["intra_node_transfers"] == 0
    assert kv["transfer_s_max"] == pytest.approx(x)
    assert res.extra["kv_transferred_bytes"] == 100 * KV_PER_TOKEN
    assert kv["nodes"] == {"0": 0, "1": 1}


def test_two_flows_on_a_shared_link_take_twice_as_long(model):
    """Two prompts done at the same time on nodes 0 and 1, both sent to the decode instance on node 2:
    they share spine -> leaf 2 (0.5 MB/s), 0.25 MB/s each."""
    pre = [inst(model, 0), inst(model, 1)]
    dec = [inst(model, 2)]
    trace = [ServingRequest(0.0, 100, 2), ServingRequest(0.0, 100, 2)]
    res = simulate_pd(trace, pre, dec, prefill_router="round_robin", kv_network=two_switch_net([0, 1, 2]))
    alone = 100 * KV_PER_TOKEN / GLOB
    for r in res.requests:
        assert r.ready == pytest.approx(D + 2 * alone + PATH_LAT)
    assert {r.prefill_instance for r in res.requests} == {0, 1}
    assert res.extra["kv_network"]["max_concurrent_transfers"] == 2


def test_staggered_flows_fluid_sharing():
    """A (1 MB) alone at 1 MB/s for 0.5 s, then shares with B (0.25 MB) at 0.5 MB/s each: B ends at
    1.0 s; A's last 0.25 MB then runs alone again: A ends at 1.25 s."""
    G = leaf_spine_graph(2, hosts_per_leaf=1, spines=1, terminal_bandwidth=1e6, global_bandwidth=1e6,
                         terminal_latency=0.0, global_latency=0.0)
    net = KVNetwork(make_router(G), G, [(0, 1, 0), (1, 1, 1)], 1, 1e9)
    fs = FlowSet(net)
    fs.add(0.0, "A", 0, 1, 1e6)
    assert fs.next_done() == pytest.approx(1.0)
    fs.add(0.5, "B", 0, 1, 0.25e6)
    assert fs.next_done() == pytest.approx(1.0)
    assert fs.pop_done(fs.next_done()) == [("B", 0.0)]
    assert fs.next_done() == pytest.approx(1.25)
    assert fs.pop_done(fs.next_done()) == [("A", 0.0)]
    assert fs.next_done() == float("inf")
    with pytest.raises(RuntimeError, match="time went back"):
        fs.add(1.0, "C", 0, 1, 1.0)


def test_intra_node_transfer_uses_the_device_link(model):
    """Prefill and decode on one node of 2 GPUs: the KV goes over NVLink (4 MB/s here), not the network."""
    p, d = inst(model, 0), inst(model, 1)
    res = simulate_pd([ServingRequest(0.0, 100, 3)], [p], [d], kv_network=two_switch_net([0, 0], gpus_per_node=2))
    r = res.requests[0]
    assert r.ready == pytest.approx(D + 100 * KV_PER_TOKEN / 4e6 + 1e-4)
    assert res.extra["kv_network"]["intra_node_transfers"] == 1


def test_nic_share_of_an_instance():
    """On a node of 4 GPUs an instance of TP 1 sends through 1/4 of the node's terminal bandwidth."""
    G = leaf_spine_graph(2, hosts_per_leaf=1, spines=1, terminal_bandwidth=4e6, global_bandwidth=1e9,
                         terminal_latency=0.0, global_latency=0.0)
    net = KVNetwork(make_router(G), G, [(0, 1, 0), (1, 2, 1)], 4, 1e9)
    fs = FlowSet(net)
    fs.add(0.0, "A", 0, 1, 1e6)
    assert fs.next_done() == pytest.approx(1e6 / 1e6)   # min(1/4 x 4 MB/s out, 2/4 x 4 MB/s in)


def test_placement_pools_packed_and_explicit():
    assert place_instances([4, 4, 4, 4], 3, 8, 10, "pools") == [0, 0, 1, 2]
    assert place_instances([4, 4, 4, 4], 3, 8, 10, "packed") == [0, 0, 1, 1]
    assert place_instances([4, 4, 2, 2], 2, 8, 10, "pools") == [0, 0, 1, 1]
    assert place_instances([1, 1], 1, 4, 2, [1, 1]) == [1, 1]
    with pytest.raises(KVNetworkError, match="TP 8 does not fit on one node of 4 GPUs"):
        place_instances([8], 1, 4, 10)
    with pytest.raises(KVNetworkError, match="needs node 2 but the system has 2 nodes"):
        place_instances([4, 4, 4], 1, 4, 2)
    with pytest.raises(KVNetworkError, match="node 0 would hold 6 GPUs"):
        place_instances([4, 2], 1, 4, 2, [0, 0])
    with pytest.raises(KVNetworkError, match="gives 1 node ids for 2 instances"):
        place_instances([1, 1], 1, 4, 2, [0])
    with pytest.raises(KVNetworkError, match="no GPUs"):
        place_instances([1], 1, 0, 2)
    with pytest.raises(KVNetworkError, match="unknown placement 'spread'"):
        place_instances([1], 1, 1, 2, "spread")


def test_from_system_dgx_h100_rates_and_latency():
    """dgx-h100: 8 x 400 Gb/s rails per node; a TP 4 instance sends through 4 of them (200 GB/s); nodes
    0 and 2 sit on one leaf (scalable unit): two 130 ns hops."""
    def fake(iid):
        return SimpleNamespace(iid=iid, model=SimpleNamespace(tp=4))
    pre, dec = [fake(0), fake(1), fake(2)], [fake(3)]
    net = KVNetwork.from_system("dgx-h100", pre, dec, "h100-80gb")
    assert [net.node_of[k] for k in range(4)] == [0, 0, 1, 2]
    fs = FlowSet(net)
    fs.add(0.0, "a", 0, 3, 200e9)
    assert fs.next_done() == pytest.approx(1.0)
    assert net.route(0, 3)[2] == pytest.approx(2 * 130e-9)
    assert net.route(0, 1)[2] == pytest.approx(2e-6)      # same node: NVLink (D2D h100-80gb)
    fs.add(0.0, "b", 0, 1, 4 * 450e9)
    assert fs.flows[1].rate == pytest.approx(4 * 450e9)
    with pytest.raises(KVNetworkError, match="no device-to-device bandwidth known for GPU type 'XPU'"):
        KVNetwork.from_system("dgx-h100", pre, dec, "XPU")
    with pytest.raises(KVNetworkError, match="no GPUs"):
        KVNetwork.from_system("generic", pre, dec, "h100-80gb")


def test_conservation_and_no_decode_before_the_kv_arrives(model):
    rng = random.Random(5)
    trace = sorted((ServingRequest(rng.uniform(0, 0.5), rng.randint(1, 60), rng.randint(1, 30)) for _ in range(150)),
                   key=lambda r: r.arrival_s)
    pre = [inst(model, k, blocks=60, bs=4, budget=64) for k in range(2)]
    dec = [inst(model, 2 + k, blocks=40, bs=4, budget=64) for k in range(2)]
    res = simulate_pd(trace, pre, dec, kv_network=two_switch_net([0, 1, 2, 2], gpus_per_node=2, hosts=3))
    assert all(r.generated == t.output_tokens for r, t in zip(res.requests, trace))
    assert sum(x.tokens_decoded for x in pre + dec) == sum(t.output_tokens for t in trace)
    assert sorted(r.uid for x in pre + dec for r in x.finished) == list(range(150))
    assert all(x.kv.free == x.kv.num_blocks and x.outstanding == 0 and x.inbound == 0 for x in pre + dec)
    moved = [r for r in res.requests if r.output > 1]
    assert res.extra["kv_network"]["transfers"] == len(moved)
    for r in moved:
        alone = r.prompt * KV_PER_TOKEN / GLOB + PATH_LAT   # the fastest a transfer can be here
        assert r.ready >= r.first + alone * (1 - 1e-9)
        # every decode token is the end of an iteration that started once the KV had arrived
        assert r.last >= r.ready + (r.output - 1) * D * (1 - 1e-9)
    assert res.extra["kv_network"]["max_concurrent_transfers"] > 1


def test_cli_system_option(tmp_path):
    """``hpctwin serve --trace ... --prefill 1 --decode 1 --system FILE``: the KV goes over FILE's network."""
    from hpctwin.twin.cli import main
    data = tmp_path / "data"
    write_profile(data / "LLM-serving" / "LLMServingSim" / "perf" / "RTX4090" / "meta-llama" / "Llama-3.1-8B" /
                  "bf16" / "tp1")
    tr = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    tr.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:10.0000000,100,5\n")
    sysf = tmp_path / "tiny.toml"
    sysf.write_text('[system]\nname = "tiny"\nnodes = 2\ngpus_per_node = 1\n[network]\nkind = "leaf_spine"\n'
                    'hosts_per_leaf = 1\nspines = 1\nterminal_bandwidth = 1e9\nglobal_bandwidth = 1e9\n'
                    'terminal_latency = 0.0\nglobal_latency = 0.0\n')
    base = ["serve", "--trace", str(tr), "--hardware", "RTX4090", "--data-dir", str(data), "-q",
            "--prefill", "1", "--decode", "1"]
    assert main(base + ["--out", str(tmp_path / "o"), "--system", str(sysf)]) == 0
    s = json.load(open(tmp_path / "o" / "summary.json"))
    kvb = 100 * 131072   # Llama-3.1-8B: 2 x 32 layers x 8 KV heads x 128 x 2 B per token
    assert s["kv_transferred_bytes"] == kvb
    assert s["kv_network"]["transfer_s_max"] == pytest.approx(kvb / 1e9)
    assert s["deployment"]["kv"]["system"] == str(sysf)
    assert main(base + ["--out", str(tmp_path / "o2"), "--system", str(sysf), "--kv-placement", "0,0"]) == 2
    assert main(["serve", "--trace", str(tr), "--hardware", "RTX4090", "--data-dir", str(data), "-q", "--out",
                 str(tmp_path / "o3"), "--system", str(sysf)]) == 2


def test_valiant_needs_a_dragonfly():
    def fake(iid):
        return SimpleNamespace(iid=iid, model=SimpleNamespace(tp=4))
    with pytest.raises(KVNetworkError, match="valiant routing is not defined for a leaf_spine topology"):
        KVNetwork.from_system("dgx-h100", [fake(0)], [fake(1)], "h100-80gb", routing="valiant")


def test_bundle_pd_instances_on_a_system(tmp_path):
    """A bundle with pd_type instances and ``kv={"system": FILE}``: its KV crosses FILE's network (1 GB/s
    bottleneck, 1 us per hop), not config.json's link_bw."""
    from hpctwin.twin.serving.cli import run_bundle
    data = tmp_path / "data"
    root = data / "LLM-serving" / "LLMServingSim"
    write_profile(root / "perf" / "RTX4090" / "meta-llama" / "Llama-3.1-8B" / "bf16" / "tp1")
    (root / "workloads").mkdir(parents=True)
    (root / "workloads" / "w.jsonl").write_text('{"input_toks": 50, "output_toks": 3, "arrival_time_ns": 0}\n')
    b = tmp_path / "bundle"
    (b / "vllm").mkdir(parents=True)
    one = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "RTX4090", "npu_mem": {"mem_size": 24, "mem_util": 0.9},
           "tp_size": 1}
    (b / "config.json").write_text(json.dumps({"link_bw": 16, "link_latency": 1000, "nodes": [{"instances": [
        {**one, "pd_type": "prefill"}, {**one, "pd_type": "decode"}]}]}))
    (b / "vllm" / "meta.json").write_text(json.dumps({"dataset_path": "/elsewhere/workloads/w.jsonl"}))
    sysf = tmp_path / "tiny.toml"
    sysf.write_text('[system]\nname = "tiny"\nnodes = 2\ngpus_per_node = 1\n[network]\nkind = "leaf_spine"\n'
                    'hosts_per_leaf = 1\nspines = 1\nterminal_bandwidth = 2e9\nglobal_bandwidth = 1e9\n'
                    'terminal_latency = 1e-6\nglobal_latency = 1e-6\n')
    _, res = run_bundle(b, data, kv={"system": str(sysf)})
    r = res.requests[0]
    assert r.ready - r.first == pytest.approx(50 * 131072 / 1e9 + 4e-6)
    assert res.extra["kv_network"]["system"] == "tiny"
