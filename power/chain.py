"""Machine layout (node -> chassis -> rack -> CDU) and the power conversion chain.

The chain follows ORNL's RAPS (ExaDigiT) model, ``raps/power.py`` (``compute_loss``,
``compute_node_power``, ``PowerManager.compute_rack_power``):

* node DC-DC stage (HPE "SIVOC" on Frontier): ``P_in = (P_node + dcdc_loss_w) / dcdc_efficiency``;
* per chassis, the sum of the node inputs plus the chassis switches is shared by its rectifiers.
  ``equal`` sharing (RAPS default): every rectifier carries ``P/R`` and draws
  ``(P/R + rectifier_loss_w) / rectifier_efficiency``, so the chassis draws
  ``(P + R * rectifier_loss_w) / rectifier_efficiency``, an affine function of ``P``.
  ``staged`` sharing (RAPS ``smart_load_sharing``): only ``k = min(R, max(1, ceil(P / rectifier_peak_w)))``
  rectifiers are on, so the chassis draws ``(P + k * rectifier_loss_w) / rectifier_efficiency``;
* each CDU adds its pump power (a constant, as in RAPS).

Everything is vectorised over nodes/chassis; powers in W.
"""
from __future__ import annotations

import numpy as np

from hpctwin.power.config import PowerConfig


class Layout:
    """Where each node slot sits: ``node_chassis``, ``chassis_rack``, ``rack_cdu`` (int arrays).

    Slots ``0 .. cfg.nodes-1`` are the schedulable nodes; slots ``cfg.nodes .. slots-1`` exist only
    when ``empty_slots = "idle"`` (powered, never scheduled). Racks fill CDU positions in order,
    skipping ``missing_rack_positions`` (Frontier: position 41 of 25 x 3, per RAPS).
    """

    def __init__(self, cfg: PowerConfig):
        self.n_slots = cfg.slots if cfg.empty_slots == "idle" else cfg.nodes
        self.node_chassis = np.arange(self.n_slots, dtype=np.int64) // cfg.nodes_per_chassis
        self.n_chassis = int(self.node_chassis[-1]) + 1
        self.chassis_rack = np.arange(self.n_chassis, dtype=np.int64) // cfg.chassis_per_rack
        self.n_racks = int(self.chassis_rack[-1]) + 1
        missing = set(cfg.missing_rack_positions)
        positions = [p for p in range(self.n_racks + len(missing)) if p not in missing][: self.n_racks]
        self.rack_cdu = np.asarray(positions, dtype=np.int64) // cfg.racks_per_cdu
        self.n_cdu = max(int(cfg.cdus), int(self.rack_cdu[-1]) + 1)
        self.chassis_cdu = self.rack_cdu[self.chassis_rack]
        self.node_cdu = self.chassis_cdu[self.node_chassis]
        self.nodes_in_chassis = np.bincount(self.node_chassis, minlength=self.n_chassis)


class Chain:
    """The conversion chain of one machine: node inputs, chassis rectifiers, CDU pumps."""

    def __init__(self, cfg: PowerConfig, layout: Layout | None = None):
        self.cfg = cfg
        self.layout = layout or Layout(cfg)
        self.switch_chassis_w = cfg.switches_per_chassis * cfg.switch_w
        self.switches_w = self.switch_chassis_w * self.layout.n_chassis
        self.cdu_pumps_w = cfg.cdu_pump_w * self.layout.n_cdu
        self.staged = cfg.rectifier_sharing == "staged"

    # ------------------------------------------------------------------ per stage
    def node_input_w(self, p_node):
        """DC-DC stage input (W) for node component power ``p_node`` (W)."""
        c = self.cfg
        return (np.asarray(p_node, dtype=float) + c.dcdc_loss_w) / c.dcdc_efficiency

    def rectifiers_on(self, chassis_out_w):
        """Number of rectifiers carrying each chassis load (``R`` under equal sharing)."""
        c = self.cfg
        p = np.asarray(chassis_out_w, dtype=float)
        if not self.staged:
            return np.full(p.shape, c.rectifiers_per_chassis, dtype=float)
        k = np.ceil(p / c.rectifier_peak_w)
        return np.clip(k, 1, c.rectifiers_per_chassis)

    def chassis_input_w(self, chassis_out_w):
        """AC input (W) of the rectifiers of chassis carrying ``chassis_out_w`` (node inputs + switches)."""
        c = self.cfg
        p = np.asarray(chassis_out_w, dtype=float)
        return (p + self.rectifiers_on(p) * c.rectifier_loss_w) / c.rectifier_efficiency

    # ------------------------------------------------------------------ whole machine
    def breakdown(self, p_node_slots: np.ndarray) -> dict[str, float]:
        """Facility figures (W) for per-slot node component powers ``p_node_slots``.

        Returns ``it_w`` (node components + switches), ``dcdc_loss_w``, ``rectifier_loss_w``,
        ``loss_w``, ``rack_input_w`` (= it + loss, the PUE denominator), ``cdu_pumps_w`` and
        ``facility_w`` (rack input + CDU pumps; the cooling plant is added by `power.cooling`).
        """
        lay = self.layout
        p = np.asarray(p_node_slots, dtype=float)
        if p.shape != (lay.n_slots,):
            raise ValueError(f"expected {lay.n_slots} slot powers, got shape {p.shape}")
        p_in = self.node_input_w(p)
        ch_out = np.bincount(lay.node_chassis, weights=p_in, minlength=lay.n_chassis) + self.switch_chassis_w
        ch_in = self.chassis_input_w(ch_out)
        it = float(p.sum()) + self.switches_w
        dcdc = float(p_in.sum() - p.sum())
        rect = float(ch_in.sum() - ch_out.sum())
        rack = float(ch_in.sum())
        return {"it_w": it, "dcdc_loss_w": dcdc, "rectifier_loss_w": rect, "loss_w": dcdc + rect,
                "rack_input_w": rack, "cdu_pumps_w": self.cdu_pumps_w, "facility_w": rack + self.cdu_pumps_w}

    def uniform_breakdown(self, cpu_util: float, gpu_util: float, busy_nodes: int | None = None) -> dict[str, float]:
        """`breakdown` with ``busy_nodes`` schedulable nodes (default all) at the given utilisation
        and every other powered slot idle."""
        cfg = self.cfg
        n = cfg.nodes if busy_nodes is None else int(busy_nodes)
        p = np.full(self.layout.n_slots, cfg.node_idle_w)
        p[:n] = cfg.node_power_w(cpu_util, gpu_util)
        return self.breakdown(p)

    def marginal_facility_w(self, d_node_w: float) -> float:
        """Facility increase (W) when one node's component power rises by ``d_node_w`` (W), under
        the affine (equal-sharing) chain: ``d / (dcdc_eff * rect_eff)``."""
        c = self.cfg
        return d_node_w / (c.dcdc_efficiency * c.rectifier_efficiency)
