"""Rejection predictor: features by hand, labels, stop rule, WDT, training on separable data, drafts carry features."""
import math

import pytest
import torch

from tests.tiny_pair import make_pair
from wisv.decoding.rejection import (
    draft_features,
    evaluate_predictor,
    round_labels,
    stop_length,
    train_predictor,
    wasted_drafting,
)
from wisv.decoding.sessions import DraftSession


def test_features_hand_values():
    f = draft_features(torch.tensor([[0.0, 0.0, 0.0, 0.0], [math.log(3.0), 0.0, -1e9, -1e9]]))
    assert f[0].tolist() == pytest.approx([0.25, math.log(4), 0.0, 0.0])
    # probabilities 3/4, 1/4, 0, 0
    assert f[1, :3].tolist() == pytest.approx([0.75, -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)), 0.5])


@pytest.mark.parametrize("drafted,accepted,labels", [(4, 4, [0, 0, 0, 0]), (4, 1, [0, 1]), (3, 0, [1])])
def test_round_labels_stop_after_the_first_rejection(drafted, accepted, labels):
    assert round_labels(drafted, accepted) == labels


def test_stop_length_and_wdt():
    assert stop_length([0.1, 0.2, 0.9, 0.1], 0.5, 8) == 2
    assert stop_length([0.9, 0.1], 0.5, 8) == 1  # always send at least one token
    assert stop_length([0.1] * 10, 0.5, 6) == 6
    assert wasted_drafting(8, 3, 0.01) == (5, pytest.approx(0.05))
    assert wasted_drafting(4, 4, 0.01) == (0, 0.0)


def test_training_separates_separable_tokens_and_is_seeded():
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(300, 4, generator=g) + torch.tensor([2.0, -1.0, 1.0, 0.0])  # accepted: confident
    x1 = torch.randn(60, 4, generator=g) + torch.tensor([-2.0, 1.0, -1.0, 0.0])  # rejected: unsure
    x, y = torch.cat([x0, x1]), torch.cat([torch.zeros(300), torch.ones(60)])
    m = train_predictor(x, y, epochs=100, seed=1)
    met = evaluate_predictor(m, x, y, 0.5)
    assert met.recall > 0.9 and met.fpr < 0.1 and (met.n_rejected, met.n_accepted) == (60, 300)
    assert torch.equal(m(x), train_predictor(x, y, epochs=100, seed=1)(x))
    with pytest.raises(ValueError):
        train_predictor(x0, torch.zeros(300))


def test_drafts_carry_one_feature_row_per_token():
    drafter, _ = make_pair()
    d = DraftSession(drafter, [1, 2, 3]).draft(5)
    assert d.features.shape == (5, 4) and bool((d.features[:, 0] <= 1).all())


def test_stop_callback_ends_the_block_and_greedy_sd_stays_lossless():
    from wisv.decoding.acceptance import greedy_accept_ids
    from wisv.decoding.sessions import VerifySession
    drafter, target = make_pair()
    assert DraftSession(drafter, [1, 2, 3]).draft(5, stop=lambda f: True).tokens.__len__() == 1  # >= 1 token
    calls = []
    d = DraftSession(drafter, [1, 2, 3]).draft(6, stop=lambda f: calls.append(f) or len(calls) == 3)
    assert len(d.tokens) == 3 and d.features.shape == (3, 4)
    # greedy SD whose blocks are cut by a stop rule still reproduces target-only greedy decoding
    prompt, out = [4, 5, 6], []
    ds, vs = DraftSession(drafter, prompt), VerifySession(target, prompt)
    flip = iter([False, True] * 100)
    while len(out) < 20:
        dr = ds.draft(4, stop=lambda f: next(flip))
        v = greedy_accept_ids(torch.tensor(dr.tokens), vs.verify(dr.tokens).argmax)
        committed = vs.commit(dr.tokens, v.n_accepted, v.next_token)
        ds.commit(committed)
        out += committed
    from wisv.tasks.evaluate import greedy_reference
    assert out[:20] == greedy_reference(target, prompt, 20)[:20]


def test_predictor_save_load_round_trip(tmp_path):
    from wisv.decoding.rejection import load_predictor, save_predictor, stop_rule
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 4, generator=g)
    y = (x[:, 0] < 0).float()
    m = train_predictor(x, y, epochs=20)
    save_predictor(m, str(tmp_path / "p.safetensors"))
    back = load_predictor(str(tmp_path / "p.safetensors"))
    assert torch.equal(back(x), m(x))
    assert stop_rule(back, 0.0)(x[0]) is True and stop_rule(back, 1.01)(x[0]) is False
    assert float(back.threshold) == 0.5  # the default operating point travels with the weights
    m.threshold.fill_(1.01)
    save_predictor(m, str(tmp_path / "p.safetensors"))
    assert stop_rule(load_predictor(str(tmp_path / "p.safetensors")))(x[0]) is False  # its own: 1.01
    state = {k: v for k, v in m.state_dict().items() if k != "threshold"}  # saved before it carried one
    from safetensors.torch import save_file
    save_file(state, str(tmp_path / "old.safetensors"))
    assert float(load_predictor(str(tmp_path / "old.safetensors")).threshold) == 0.5
    (tmp_path / "bad.safetensors").write_bytes(b"nope")
    with pytest.raises(ValueError, match="rejection predictor"):
        load_predictor(str(tmp_path / "bad.safetensors"))


def test_choose_threshold_weighs_wasted_drafting_against_extra_rounds():
    from wisv.decoding.rejection import choose_threshold
    # round 1: token 3 is rejected (p 0.9) and flagged by any threshold <= 0.9; round 2: every token accepted,
    # token 2 looks risky (p 0.6)
    probs, accepted = [[0.1, 0.1, 0.9, 0.1], [0.1, 0.6, 0.1, 0.1]], [2, 4]
    cheap_round, _ = choose_threshold(probs, accepted, 4, tau_d_s=1.0, round_s=0.1, grid=(0.5, 0.7, 0.95))
    dear_round, cost = choose_threshold(probs, accepted, 4, tau_d_s=1.0, round_s=10.0, grid=(0.5, 0.7, 0.95))
    # 0.5 stops both rounds (sends 2 + 1, commits 3 + 2); 0.7 stops the first only (2 + 4, commits 3 + 5);
    # 0.95 stops none (4 + 4, commits 3 + 5).  Cheap rounds: the false stop of 0.5 costs little, its saved
    # drafting wins (3.2 / 5 s per token vs 6.2 / 8); dear rounds: 0.7 loses no accepted token and wastes nothing
    assert cheap_round == 0.5 and dear_round == 0.7
    assert cost[0.5] == pytest.approx((3 * 1.0 + 2 * 10.0) / 5) and cost[0.95] == pytest.approx((8 + 20) / 8)
    # drafting that costs nothing next to a round: never stop early is as good as stopping right
    assert choose_threshold(probs, accepted, 4, tau_d_s=0.0, round_s=1.0, grid=(0.5, 0.95))[0] == 0.95
    with pytest.raises(ValueError):
        choose_threshold(probs, [1], 4, 1.0, 1.0)


def test_confidence_stop_is_the_peers_rule_and_speculative_generate_takes_it():
    from wisv.decoding.rejection import confidence_stop
    from wisv.decoding.speculative import speculative_generate
    from wisv.tasks.evaluate import greedy_reference
    rule = confidence_stop(0.4)
    assert rule(torch.tensor([0.39, 1.0, 0.1, 1.0])) is True and rule(torch.tensor([0.4, 1.0, 0.1, 1.0])) is False
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        confidence_stop(1.2)
    drafter, target = make_pair()
    ref = greedy_reference(target, [4, 5, 6], 24)
    full = speculative_generate(drafter, target, [4, 5, 6], max_new_tokens=24, draft_len=6)
    cut = speculative_generate(drafter, target, [4, 5, 6], max_new_tokens=24, draft_len=6, stop=confidence_stop(1.0))
    assert full.tokens == cut.tokens == ref  # lossless either way
    assert all(r.drafted <= 1 for r in cut.rounds) and max(r.drafted for r in full.rounds) > 1  # 1.0: one per block
