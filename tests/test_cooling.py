"""Built-in cooling model: exact first-order stages, Frontier's PUE band, FMU back-end errors."""
from __future__ import annotations

import zipfile

import numpy as np
import pytest

from hpctwin.power.chain import Chain
from hpctwin.power.config import PowerConfigError, parse_cooling, parse_power
from hpctwin.power.cooling import CP_WATER, first_order_lag, simulate_cooling
from hpctwin.power.fmu import check_fmu, run_fmu
from hpctwin.twin.system import load_system


def test_first_order_lag_matches_analytic_step():
    dt, tau = 15.0, 600.0
    x = np.full(200, 10.0)
    y = first_order_lag(x, dt, tau, y0=0.0)
    k = np.arange(1, 201)
    assert y == pytest.approx(10.0 * (1 - np.exp(-k * dt / tau)), rel=1e-12)


def frontier():
    spec = load_system("frontier")
    p = parse_power(spec.power, nodes=spec.nodes, cpus_per_node=1, gpus_per_node=4, path=spec.path)
    c = parse_cooling(spec.cooling, path=spec.path)
    return Chain(p), c


@pytest.mark.parametrize("busy,util", [(0.7, 0.6), (0.8, 0.65), (0.9, 0.7), (1.0, 0.5)])
@pytest.mark.parametrize("wet_bulb", [5.0, 16.85, 22.0])
def test_frontier_typical_load_pue_and_supply(busy, util, wet_bulb):
    """Frontier-class: ~32 C supply water and PUE ~1.03-1.06 under typical load."""
    ch, cool = frontier()
    b = ch.uniform_breakdown(util, util, busy_nodes=int(busy * 9408))
    n = 400
    out = simulate_cooling(cool, np.full(n, b["rack_input_w"]), 15.0, np.full(n, wet_bulb))
    pue = (b["facility_w"] + out["plant_w"][-1]) / b["rack_input_w"]
    assert 1.03 <= pue <= 1.06
    assert out["secondary_supply_c"][-1] == pytest.approx(32.0)
    assert out["chiller_w"][-1] == 0.0                    # towers alone at 32 C supply
    # steady state return = supply + liquid heat / (m c_p)
    m_s = cool.design_heat_w / (CP_WATER * cool.secondary_delta_t_design_c)
    assert out["secondary_return_c"][-1] == pytest.approx(32.0 + cool.liquid_fraction * b["rack_input_w"] / (m_s * CP_WATER), rel=1e-6)


def test_affinity_laws_and_chiller():
    _, cool = frontier()
    q = np.full(300, 0.6 * cool.design_heat_w)
    low = simulate_cooling(cool, q, 15.0, np.full(300, 10.0))
    assert low["pump_w"][-1] == pytest.approx((cool.primary_pump_design_w + cool.tower_pump_design_w) * 0.6 ** 3, rel=1e-6)
    assert low["fan_w"][-1] == pytest.approx(cool.tower_fan_design_w * cool.tower_fan_min_speed ** 3)
    # a wet bulb above the needed tower water temperature forces the trim chiller on
    hot = simulate_cooling(cool, q, 15.0, np.full(300, 31.0))
    assert hot["fan_speed"][-1] == 1.0 and hot["chiller_w"][-1] > 0
    assert hot["plant_w"][-1] > low["plant_w"][-1]


def test_year_at_15s_is_vectorised():
    """2.1 M steps run through lfilter; correctness of the shape, not a timing assertion."""
    _, cool = frontier()
    n = 365 * 24 * 240
    out = simulate_cooling(cool, np.full(n, 2.0e7), 15.0, np.full(n, 15.0))
    assert out["plant_w"].shape == (n,) and np.isfinite(out["plant_w"]).all()


# ------------------------------------------------------------------ FMU back-end
def fake_fmu(path, names):
    xml = "<fmiModelDescription fmiVersion='2.0' modelName='x'><ModelVariables>" + "".join(
        f"<ScalarVariable name='{n}' causality='input'><Real/></ScalarVariable>" for n in names
    ) + "</ModelVariables></fmiModelDescription>"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("modelDescription.xml", xml)


def fmu_cfg(tmp_path, fmu_name="m.fmu", outputs=None):
    table = {"backend": "fmu", "fmu_path": fmu_name,
             "fmu_inputs": {"heat_w": "Q", "wet_bulb_c": "Twb"},
             "fmu_outputs": outputs or {"plant_w": "W_plant"}}
    return parse_cooling(table, path=str(tmp_path / "sys.toml"))


def test_fmu_missing_file(tmp_path):
    cfg = fmu_cfg(tmp_path)
    with pytest.raises(PowerConfigError, match=r"FMU file .*m.fmu \(key \[cooling\] fmu_path\): not found"):
        check_fmu(cfg)


def test_fmu_missing_variable(tmp_path):
    fake_fmu(tmp_path / "m.fmu", ["Q", "Twb"])
    cfg = fmu_cfg(tmp_path)
    with pytest.raises(PowerConfigError, match=r"\[cooling.fmu_outputs\] key 'plant_w' names FMU variable 'W_plant', which .*m.fmu does not have"):
        check_fmu(cfg)


def test_fmu_required_output_and_unknown_input(tmp_path):
    fake_fmu(tmp_path / "m.fmu", ["Q", "Twb", "W_plant"])
    cfg = fmu_cfg(tmp_path, outputs={"other": "W_plant"})
    with pytest.raises(PowerConfigError, match=r"\[cooling.fmu_outputs\] key 'plant_w' is missing"):
        check_fmu(cfg)
    bad = parse_cooling({"backend": "fmu", "fmu_path": "m.fmu", "fmu_inputs": {"humidity": "Q"},
                         "fmu_outputs": {"plant_w": "W_plant"}}, path=str(tmp_path / "sys.toml"))
    with pytest.raises(PowerConfigError, match=r"\[cooling.fmu_inputs\] key 'humidity' is not an input"):
        check_fmu(bad)


def test_fmu_not_a_zip(tmp_path):
    (tmp_path / "m.fmu").write_text("not a zip")
    with pytest.raises(PowerConfigError, match=r"not a valid FMU"):
        check_fmu(fmu_cfg(tmp_path))


def test_fmu_without_fmpy_gives_install_hint(tmp_path, monkeypatch):
    import builtins
    fake_fmu(tmp_path / "m.fmu", ["Q", "Twb", "W_plant"])
    real = builtins.__import__

    def no_fmpy(name, *a, **k):
        if name == "fmpy" or name.startswith("fmpy."):
            raise ImportError("No module named 'fmpy'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_fmpy)
    with pytest.raises(ImportError, match=r"pip install 'hpctwin\[fmu\]'"):
        run_fmu(fmu_cfg(tmp_path), np.ones(3), np.arange(3) * 15.0, 15.0, np.ones(3))


def test_first_order_lag_equals_the_recurrence():
    """The block-wise filter equals y[k] = a*y[k-1] + (1-a)*x[k] (scipy's lfilter) to rounding."""
    from scipy.signal import lfilter
    rng = np.random.default_rng(3)
    for n, dt, tau, y0 in ((1, 15.0, 60.0, 2.0), (255, 15.0, 600.0, None), (1000, 15.0, 120.0, 5.0),
                           (70001, 15.0, 3000.0, None), (513, 15.0, 1e-3, 1.0)):
        x = rng.normal(1e6, 2e5, n)
        a = np.exp(-dt / tau)
        start = x[0] if y0 is None else y0
        want, _ = lfilter([1 - a], [1, -a], x, zi=[a * start])
        np.testing.assert_allclose(first_order_lag(x, dt, tau, y0), want, rtol=1e-10)
