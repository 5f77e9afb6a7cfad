"""Decision head: shapes, save/load round trip, clear load errors, CSI input, and tau = 0 == greedy SD."""
import json

import pytest
import torch

from channel.csi import CSI, FEATURE_DIM
from tests.tiny_pair import make_pair
from wisv.decoding.speculative import RejectAll, speculative_generate
from wisv.head.model import DecisionHead, HeadConfig, HeadPolicy, build_inputs
from wisv.head.store import load_head, save_head
from wisv.timing.compute import head_flops

CONFIG_FILE = "head.json"


def _head(csi_dim=FEATURE_DIM, seed=0, d_d=8, d_t=12):
    torch.manual_seed(seed)
    return DecisionHead(HeadConfig(d_draft=d_d, d_target=d_t, csi_dim=csi_dim, hidden=16)).eval()


def test_inputs_and_outputs_have_the_documented_shapes():
    z = build_inputs(torch.zeros(3, 8), torch.zeros(3, 12), torch.zeros(3, FEATURE_DIM))
    assert z.shape == (3, 8 + 12 + FEATURE_DIM)
    p = _head()(torch.randn(7, 8 + 12 + FEATURE_DIM))
    assert p.shape == (7,) and bool(((p > 0) & (p < 1)).all())
    assert _head().cfg.flops_per_query() == head_flops(8 + 12 + FEATURE_DIM, 16)


def test_save_load_round_trip_gives_identical_outputs(tmp_path):
    h = _head()
    h.set_standardisation(torch.randn(50, h.cfg.d_in) * 3 + 1)
    z = torch.randn(5, h.cfg.d_in)
    loaded = load_head(save_head(h, tmp_path / "h"))
    assert loaded.cfg == h.cfg
    assert torch.equal(loaded(z), h(z))
    assert load_head(tmp_path / "h" / CONFIG_FILE).cfg == h.cfg  # the json path works too


def test_load_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="not a decision-head directory"):
        load_head(tmp_path)
    save_head(_head(), tmp_path / "h")
    cfg = json.loads((tmp_path / "h" / CONFIG_FILE).read_text())
    (tmp_path / "h" / CONFIG_FILE).write_text(json.dumps({**cfg, "hidden": 32}))
    with pytest.raises(ValueError, match="weights do not match"):
        load_head(tmp_path / "h")
    (tmp_path / "h" / CONFIG_FILE).write_text(json.dumps({**cfg, "csi_norm": {**cfg["csi_norm"], "rtt_hi_ms": 1.0}}))
    with pytest.raises(ValueError, match="retrain"):
        load_head(tmp_path / "h")


def test_policy_checks_hidden_sizes_and_uses_the_csi():
    pol = HeadPolicy(_head(seed=3))
    hd, ht = torch.randn(4, 8), torch.randn(4, 12)
    good, poor = pol.reject_probs(hd, ht, [0, 1, 2, 3], CSI.symmetric(500, 5)), pol.reject_probs(
        hd, ht, [0, 1, 2, 3], CSI.symmetric(2, 50))
    assert not torch.allclose(good, poor)
    assert torch.equal(pol.reject_probs(hd, ht, [0, 1, 2, 3], None),
                       pol.reject_probs(hd, ht, [0, 1, 2, 3], CSI.ideal()))
    with pytest.raises(ValueError, match="hidden sizes"):
        pol.reject_probs(torch.randn(1, 9), torch.randn(1, 12), [0])


def test_head_without_csi_input_ignores_the_link():
    pol = HeadPolicy(_head(csi_dim=0))
    hd, ht = torch.randn(2, 8), torch.randn(2, 12)
    assert torch.equal(pol.reject_probs(hd, ht, [0, 1], CSI.symmetric(500, 5)),
                       pol.reject_probs(hd, ht, [0, 1], CSI.symmetric(1, 90)))


@pytest.mark.parametrize("k", [2, 5])
def test_tau_zero_with_a_head_is_greedy_sd(k):
    drafter, target = make_pair()
    pol = HeadPolicy(_head(d_d=32, d_t=32))
    prompt = [0, 5, 9, 3]
    ref = speculative_generate(drafter, target, prompt, max_new_tokens=24, draft_len=k, rule="wisv",
                               policy=RejectAll())
    out = speculative_generate(drafter, target, prompt, max_new_tokens=24, draft_len=k, rule="wisv", policy=pol,
                               tau=0.0, csi=CSI.symmetric(2, 50))
    assert out.tokens == ref.tokens and [r.accepted for r in out.rounds] == [r.accepted for r in ref.rounds]
    loose = speculative_generate(drafter, target, prompt, max_new_tokens=24, draft_len=k, rule="wisv", policy=pol,
                                 tau=1.01, csi=CSI.symmetric(2, 50))
    assert all(r.accepted == r.drafted for r in loose.rounds)  # tau > 1 accepts every draft token
