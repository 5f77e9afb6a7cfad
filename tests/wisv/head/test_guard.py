"""The sure-target guard (wisv/head/guard.py): no judge overrules a confident target."""
import math

import torch

from wisv.head.features import SCALARS, EdgeFeatures
from wisv.head.guard import GuardConfig, guard, sure_target


def feats(top1: list[float], margin: list[float], out_pos: list[float] | None = None) -> EdgeFeatures:
    s = torch.zeros(len(top1), len(SCALARS))
    s[:, SCALARS.index("top1")] = torch.tensor(top1)
    s[:, SCALARS.index("nll_margin")] = torch.tensor(margin)
    s[:, SCALARS.index("out_pos")] = torch.tensor(out_pos or [100.0] * len(top1))
    return EdgeFeatures(s, torch.zeros(len(top1), 4))


def test_a_sure_target_is_rejected_whatever_the_judge_says():
    e = feats([0.95, 0.5, 0.3, 0.89], [0.1, 5.0, 0.2, 3.9])
    p = torch.tensor([0.0, 0.01, 0.02, 0.03])
    out = guard(p, e, GuardConfig(top1_min=0.9, nll_margin_min_nats=4.0))
    assert out.tolist() == [1.0, 1.0, p[2].item(), p[3].item()]


def test_no_guard_and_a_guard_that_never_fires_leave_the_scores():
    e = feats([0.99, 0.2], [9.0, 0.1])
    p = torch.tensor([0.1, 0.2])
    assert torch.equal(guard(p, e, None), p)
    assert torch.equal(guard(p, e, GuardConfig(top1_min=1.01, nll_margin_min_nats=math.inf)), p)
    assert sure_target(e, GuardConfig()).tolist() == [True, False]


def test_no_mismatch():
    assert guard(torch.zeros(0), EdgeFeatures.empty(4), GuardConfig()).shape == (0,)


def test_the_output_s_first_tokens_are_protected():
    e = feats([0.3, 0.3, 0.3], [0.1, 0.1, 0.1], out_pos=[0.0, 7.0, 8.0])
    p = torch.tensor([0.01, 0.02, 0.03])
    cfg = GuardConfig(top1_min=1.01, nll_margin_min_nats=math.inf, protect_tokens=8)
    assert guard(p, e, cfg).tolist() == [1.0, 1.0, p[2].item()]  # out_pos 8 is the ninth token: not protected
    assert torch.equal(guard(p, e, GuardConfig(1.01, math.inf, protect_tokens=0)), p)
