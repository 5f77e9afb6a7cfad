"""One save and one load for heads and judges, dispatched on ``kind`` (wisv/head/store.py)."""
from __future__ import annotations

import json

import pytest
import torch

from channel.csi import CSI
from wisv.head.features import SCALARS
from wisv.head.judges import LINK_BITS, JudgeConfig, JudgePolicy, LinearJudge, t_link_s
from wisv.head.model import DecisionHead, HeadConfig, HeadPolicy, Scorer
from wisv.head.store import KINDS, is_policy_dir, load_head, load_policy_dir, save_head, save_policy
from wisv.timing.latency import t_single_exchange

S = len(SCALARS)


def _head() -> HeadPolicy:
    torch.manual_seed(0)
    h = DecisionHead(HeadConfig(d_draft=8, d_target=12, hidden=4, tau=0.3))
    h.set_standardisation(torch.randn(40, h.cfg.d_in) * 2 + 1)
    return HeadPolicy(h)


def _judge() -> JudgePolicy:
    torch.manual_seed(1)
    cfg = JudgeConfig("edge", "linear", ("edge", "h_after"), (S, 12), tau=0.2, tau_mode="link", t_ref_s=0.05,
                      link_bits=(2000.0, 1200.0))
    model = LinearJudge(cfg)
    model.set_standardisation(torch.randn(30, cfg.d_in))
    return JudgePolicy(cfg, model)


def test_head_and_judge_share_the_standardisation_and_the_logit():
    head, judge = _head(), _judge()
    assert isinstance(head.model, Scorer) and isinstance(judge.model, Scorer)
    z = torch.randn(5, judge.cfg.d_in)
    want = torch.sigmoid(judge.model.net((z - judge.model.z_mean) / judge.model.z_std).squeeze(-1))
    assert torch.allclose(judge.model(z), want)


@pytest.mark.parametrize("make", [_head, _judge, lambda: JudgePolicy(JudgeConfig("fly", "fly", ("edge",), (S,)))],
                         ids=["head", "linear", "fly"])
def test_round_trip_writes_the_kind_and_scores_alike(tmp_path, make):
    policy = make()
    path = save_policy(policy, tmp_path / "p")
    stem = KINDS[policy.kind].stem
    assert json.loads((path / f"{stem}.json").read_text())["kind"] == policy.kind
    assert (path / f"{stem}.safetensors").is_file() == (policy.model is not None) and is_policy_dir(path)
    loaded, tau = load_policy_dir(path)
    assert type(loaded) is type(policy) and loaded.cfg == policy.cfg and tau == policy.tau
    if policy.model is not None:
        for k, v in policy.model.state_dict().items():
            assert torch.equal(loaded.model.state_dict()[k], v), k
    assert load_policy_dir(path, 0.7)[1] == 0.7


def test_a_config_without_kind_loads_as_its_stems_first_kind(tmp_path):
    save_policy(_head(), tmp_path / "h")
    raw = json.loads((tmp_path / "h" / "head.json").read_text())
    (tmp_path / "h" / "head.json").write_text(json.dumps({k: v for k, v in raw.items() if k != "kind"}))
    assert isinstance(load_policy_dir(tmp_path / "h")[0], HeadPolicy)
    save_policy(_judge(), tmp_path / "j")
    raw = json.loads((tmp_path / "j" / "judge.json").read_text())
    (tmp_path / "j" / "judge.json").write_text(json.dumps({k: v for k, v in raw.items() if k not in ("kind",
                                                                                                      "link_bits")}))
    loaded, _ = load_policy_dir(tmp_path / "j")
    assert loaded.kind == "linear" and loaded.cfg.link_bits == LINK_BITS  # the shipped judges' round


def test_bad_kinds_and_files_name_the_problem(tmp_path):
    save_policy(_head(), tmp_path / "h")
    raw = json.loads((tmp_path / "h" / "head.json").read_text())
    (tmp_path / "h" / "head.json").write_text(json.dumps({**raw, "kind": "linear"}))
    with pytest.raises(ValueError, match="kind 'linear' is not a head's"):
        load_policy_dir(tmp_path / "h")
    (tmp_path / "h" / "head.json").write_text(json.dumps({**raw, "kind": "top-k"}))
    with pytest.raises(ValueError, match="kind 'top-k'"):
        load_policy_dir(tmp_path / "h")
    (tmp_path / "h" / "head.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a valid head config"):
        load_policy_dir(tmp_path / "h")
    with pytest.raises(ValueError, match="not a decision-head directory"):
        load_policy_dir(tmp_path / "none")
    save_policy(_judge(), tmp_path / "j")
    (tmp_path / "j" / "judge.safetensors").unlink()
    with pytest.raises(ValueError, match="weights do not match"):
        load_policy_dir(tmp_path / "j")
    save_policy(JudgePolicy(JudgeConfig("fly", "fly", ("edge",), (S,))), tmp_path / "f")
    with pytest.raises(ValueError, match="not a decision head"):
        load_head(tmp_path / "f")


def test_hidden_sizes_are_checked_for_heads_and_judges(tmp_path):
    save_policy(_head(), tmp_path / "h")
    save_policy(_judge(), tmp_path / "j")
    load_policy_dir(tmp_path / "h", d_draft=8, d_target=12)
    with pytest.raises(ValueError, match="drafter hidden size 8"):
        load_policy_dir(tmp_path / "h", d_draft=16)
    load_policy_dir(tmp_path / "j", d_draft=99, d_target=12)  # reads no drafter hidden state
    with pytest.raises(ValueError, match="target hidden size 12"):
        load_policy_dir(tmp_path / "j", d_target=16)


def test_save_head_leaves_the_training_mode_alone(tmp_path):
    head = DecisionHead(HeadConfig(d_draft=8, d_target=12, hidden=4)).train()
    assert load_head(save_head(head, tmp_path / "h")).cfg == head.cfg and head.training


def test_t_link_is_the_latency_models_exchange_of_the_judges_bits():
    poor = CSI.symmetric(3, 45)
    assert t_link_s(poor) == t_single_exchange(960.0, 960.0, poor) == pytest.approx(0.045 + 2 * 120 * 8 / 3e6)
    judge = _judge()
    assert judge.threshold(0.2, poor) == pytest.approx(0.2 * (t_single_exchange(2000, 1200, poor) / 0.05))
