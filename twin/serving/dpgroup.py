"""A vLLM data-parallel group with expert parallelism (DP attention, EP experts): members in lockstep.

vLLM runs every DP rank's forward together: an MoE layer's expert dispatch and combine are collectives
over the group, so a rank with nothing to do runs a dummy batch, and every rank's forward is padded to
the largest token count in the group (CUDA-graph DP padding). LLMServingSim models this the same way
(``serving/__main__.py``: ``dp_pending`` barrier, ``_pad_batch_to_max``; ``trace_generator._emit_moe_block``):

* each member schedules its own batch; an idle member contributes a 1-token dummy decode;
* dense layers and the MoE block run at the group's maximum token count (attention, ``lm_head`` and the
  sampler see only the member's real requests: vLLM computes logits at the scheduled requests' last
  tokens, and the dummy batch runs no sampler; LLMServingSim's ``_pad_batch_to_max`` also pads
  ``lm_head``, which vLLM does not);
* every EP rank's experts serve the whole group's tokens (all-gathered; `IterationModel.moe_lookup`);
* each MoE layer adds an all-gather (dispatch: hidden state + router logits) and a reduce-scatter
  (combine) over the EP ranks (`IterationModel.ep_comm_s`);
* the iteration ends for everyone when the slowest member ends.
"""
from __future__ import annotations

from .instance import Instance

#: a 1-token dummy decode of an idle DP member (LLMServingSim: Batch(total_len=1, decode_k_list=[1])); no
#: sequence reaches the sampler (vLLM ``execute_dummy_batch`` -> ``_dummy_run(1, uniform_decode=True)``)
DUMMY_SHAPE = (1, 0, 0, 0, 1, 1, 1, 1)


class DPGroup:
    """Members of one DP group, advanced together on one clock."""

    def __init__(self, members: list[Instance]) -> None:
        if not members:
            raise ValueError("a DP group needs at least one member")
        self.members = members

    @property
    def t(self) -> float:
        return max(m.t for m in self.members)

    def idle(self) -> bool:
        return all(m.idle() for m in self.members)

    def advance_until(self, t_limit: float) -> None:
        """Run every lockstep iteration that starts before ``t_limit``."""
        while not self.idle():
            t = self.t
            if t >= t_limit:
                return
            for m in self.members:
                m.t = t
            batches = [None if m.idle() else m.form_batch() for m in self.members]
            shapes = [b.shape() if b is not None else DUMMY_SHAPE for b in batches]
            padded = max(s[0] for s in shapes)
            dt = max(m.model.padded_iteration_s(s, padded) for m, s in zip(self.members, shapes))
            for m, b in zip(self.members, batches):
                if b is not None:
                    m.complete(b, t + dt)
                else:
                    m.t = t + dt

    def drain(self) -> None:
        self.advance_until(float("inf"))
