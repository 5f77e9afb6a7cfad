"""Named-input judges: training-free rules, the link-dependent tau, saving and loading (wisv/head/judges.py)."""
from __future__ import annotations

import math
from dataclasses import asdict

import pytest
import torch

from channel.csi import CSI
from wisv.head.features import BASE_SCALARS, SCALARS, EdgeFeatures
from wisv.head.judges import JudgeConfig, JudgePolicy, LinearJudge, link_tau, rule_probs, t_link_s
from wisv.head.store import load_policy_dir, save_policy

S = len(SCALARS)


def features(**cols: list[float]) -> EdgeFeatures:
    m = len(next(iter(cols.values())))
    x = torch.zeros(m, S)
    for name, vals in cols.items():
        x[:, SCALARS.index(name)] = torch.tensor(vals)
    return EdgeFeatures(x, torch.zeros(m, 4))


def test_fly_keeps_only_uncertain_mismatches_the_target_goes_on_agreeing_with():
    cfg = JudgeConfig("fly", "fly", ("edge",), (S,), window=3)
    ef = features(entropy=[2.0, 2.0, 0.1, 2.0], lookahead=[3, 1, 3, 0], remaining=[5, 5, 5, 0])
    p = rule_probs(cfg, ef)
    assert p[0] == pytest.approx(math.exp(-2.0)) and p[1] == 1 and p[3] == 1  # no agreement, or no evidence
    assert p[2] == pytest.approx(math.exp(-0.1))  # agrees, but the target was sure: near 1, rejected at any tau < it
    assert rule_probs(cfg, features(entropy=[2.0], lookahead=[1], remaining=[1]))[0] < 1  # the block ends: 1 of 1


def test_nll_margin_is_monotone_in_the_margin():
    cfg = JudgeConfig("nll-margin", "nll-margin", ("edge",), (S,))
    p = rule_probs(cfg, features(nll_margin=[0.0, 0.5, 2.0]))
    assert p[0] == 0 and p[0] < p[1] < p[2] and p[2] == pytest.approx(1 - math.exp(-2))


def test_link_tau_is_strict_on_a_good_link_and_bold_on_a_poor_one():
    poor, good = CSI.symmetric(3, 45), CSI.symmetric(200, 5)
    cfg = JudgeConfig("edge", tau=0.4, tau_mode="link", t_ref_s=t_link_s(poor), gamma=1.5, tau_cap=0.9)
    assert link_tau(cfg, 0.4, poor) == pytest.approx(0.4)
    assert link_tau(cfg, 0.4, good) == pytest.approx(0.4 * (t_link_s(good) / t_link_s(poor)) ** 1.5)
    assert link_tau(cfg, 0.4, good) < 0.4 / 20
    assert link_tau(cfg, 0.4, CSI.symmetric(0.01, 500)) == pytest.approx(0.9)  # capped
    assert link_tau(cfg, 0.4, None) == 0  # no CSI reported: the ideal link, the strictest reading
    assert link_tau(cfg, 0.2, poor) == pytest.approx(link_tau(cfg, 0.4, poor) / 2)  # --tau scales every link
    assert link_tau(JudgeConfig("x", tau=0.3), 0.3, poor) == 0.3  # fixed mode


def test_judge_round_trip_and_missing_inputs(tmp_path):
    cfg = JudgeConfig("aj", "linear", ("h_draft", "h_target"), (3, 4), tau=0.3)
    model = LinearJudge(cfg)
    pol = JudgePolicy(cfg, model)
    hd, ht = torch.randn(2, 3), torch.randn(2, 4)
    p = pol.reject_probs(hd, ht, [0, 1])
    loaded, tau = load_policy_dir(save_policy(pol, tmp_path / "aj"))
    assert tau == 0.3 and loaded.cfg == cfg and torch.allclose(loaded.reject_probs(hd, ht, [0, 1]), p)
    assert "h_draft" in loaded.inputs and load_policy_dir(tmp_path / "aj", tau=0.1)[1] == 0.1
    with pytest.raises(ValueError, match="serve it with fh or sh"):
        pol.reject_probs(None, ht, [0, 1])
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "judge.json").write_text("{")
    with pytest.raises(ValueError, match="not a valid judge config"):
        load_policy_dir(tmp_path / "bad")


def test_a_judge_reads_its_declared_edge_columns_and_refuses_missing_sibling_ones():
    from wisv.head.features import BASE_SCALARS
    from wisv.head.judges import gather_inputs
    x = torch.arange(2 * S, dtype=torch.float32).reshape(2, S)
    x[:, len(BASE_SCALARS):] = float("nan")  # no sibling pass this round
    ef = EdgeFeatures(x, torch.zeros(2, 4))
    narrow = JudgeConfig("old", "linear", ("edge",), (len(BASE_SCALARS),))
    assert torch.equal(gather_inputs(narrow, None, None, ef), x[:, :len(BASE_SCALARS)])
    wide = JudgeConfig("sib", "linear", ("edge",), (S,))
    with pytest.raises(ValueError, match="sibling"):
        gather_inputs(wide, None, None, ef)


def test_guard_protect_tokens_makes_a_guard_and_round_trips():
    cfg = JudgeConfig("edge", "linear", ("edge",), (len(BASE_SCALARS),), guard_protect_tokens=12)
    assert cfg.guard_config.protect_tokens == 12
    assert cfg.guard_config.top1_min > 1 and math.isinf(cfg.guard_config.nll_margin_min_nats)
    assert JudgeConfig("edge", "linear", ("edge",), (len(BASE_SCALARS),)).guard_config is None
    again = JudgePolicy.from_config(asdict(cfg), "test")
    assert again.cfg.guard_config.protect_tokens == 12
