"""The acceptance-policy interface: every policy implements every member its callers read (wisv/head/policy.py)."""
from __future__ import annotations

import pytest
import torch

from channel.csi import CSI
from wisv.head.features import SCALARS
from wisv.head.judges import JudgeConfig, JudgePolicy, LinearJudge
from wisv.head.model import DecisionHead, HeadConfig, HeadPolicy
from wisv.head.policy import AcceptAll, MismatchPolicy, RejectAll

S = len(SCALARS)


def policies() -> dict[str, MismatchPolicy]:
    torch.manual_seed(0)
    aj = JudgeConfig("aj", "linear", ("h_draft", "h_target"), (8, 12), hidden=4)
    edge = JudgeConfig("edge", "linear", ("edge", "h_after"), (S, 12), tau=0.2, tau_mode="link", t_ref_s=0.05)
    return {"reject-all": RejectAll(), "accept-all": AcceptAll(),
            "head": HeadPolicy(DecisionHead(HeadConfig(d_draft=8, d_target=12, hidden=4, hidden_layer=-2, tau=0.3))),
            "head-nocsi": HeadPolicy(DecisionHead(HeadConfig(d_draft=8, d_target=12, csi_dim=0, hidden=4))),
            "autojudge": JudgePolicy(aj, LinearJudge(aj)), "edge": JudgePolicy(edge, LinearJudge(edge)),
            "fly": JudgePolicy(JudgeConfig("fly", "fly", ("edge",), (S,), tau=0.05))}


@pytest.mark.parametrize("name", list(policies()))
def test_every_policy_implements_the_interface(name):
    p = policies()[name]
    assert isinstance(p, MismatchPolicy)
    assert isinstance(p.inputs, tuple) and isinstance(p.tau, float) and isinstance(p.hidden_layer, int)
    assert p.d_draft is None or p.d_draft > 0
    assert p.d_target is None or p.d_target > 0
    assert len(p.flops_dims) == 2 and p.threshold(0.4, None) >= 0


def test_members_say_what_each_policy_reads():
    p = policies()
    assert (p["reject-all"].inputs, p["reject-all"].d_draft, p["reject-all"].tau) == ((), None, 0.5)
    assert (p["head"].d_draft, p["head"].d_target, p["head"].hidden_layer, p["head"].tau) == (8, 12, -2, 0.3)
    assert p["head"].inputs == ("h_draft", "h_target", "csi") and "csi" not in p["head-nocsi"].inputs
    assert p["head"].flops_dims == (4, 5) and p["autojudge"].flops_dims == (4, 0) and p["fly"].flops_dims == (1, 0)
    assert (p["autojudge"].d_draft, p["autojudge"].d_target) == (8, 12)
    assert (p["edge"].d_draft, p["edge"].d_target, p["edge"].hidden_layer) == (None, 12, -1)  # h_after: the target's
    assert p["edge"].inputs == ("edge", "h_after", "csi") and p["fly"].d_target is None


def test_threshold_moves_only_for_a_link_mode_judge():
    p, poor, good = policies(), CSI.symmetric(3, 45), CSI.symmetric(200, 5)
    for name in ("reject-all", "head", "autojudge", "fly"):
        assert p[name].threshold(0.4, poor) == p[name].threshold(0.4, good) == 0.4, name
    assert p["edge"].threshold(0.2, good) < p["edge"].threshold(0.2, poor)


def test_a_class_missing_a_member_is_not_a_policy():
    class NoWidths:
        inputs, tau, hidden_layer, flops_dims = (), 0.5, -1, (0, 0)

        def threshold(self, tau, csi):
            return tau

        def reject_probs(self, h_draft, h_target, positions, csi=None, edge=None):
            return torch.ones(len(positions))

    assert not isinstance(NoWidths(), MismatchPolicy)
    NoWidths.d_draft = NoWidths.d_target = None
    assert isinstance(NoWidths(), MismatchPolicy)


def test_a_linear_judge_needs_its_model_and_a_rule_none():
    with pytest.raises(ValueError, match="a linear judge has a model"):
        JudgePolicy(JudgeConfig("aj", "linear", ("h_target",), (12,)))
    cfg = JudgeConfig("fly", "fly", ("edge",), (S,))
    with pytest.raises(ValueError, match="a linear judge has a model"):
        JudgePolicy(cfg, LinearJudge(cfg))
