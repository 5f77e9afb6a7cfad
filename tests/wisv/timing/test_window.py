"""The draft-window policy (wisv/timing/window.py) on hand-built links, drafters and verify costs."""
import pytest

from channel.csi import CSI
from wisv.timing.latency import PayloadBits
from wisv.timing.window import (
    AcceptanceHistory,
    VerifyFit,
    WindowTracker,
    choose_k,
    expected_committed,
    keep_drafting,
    round_cost,
    update_history,
    update_verify,
)

PB = PayloadBits.paper(vocab=32000, d_d=2048)  # 15-bit ids, 32 kbit of fp16 hidden state per FH token
TAU_D = 0.002  # s per drafted token
CHEAP = lambda k: 0.001 + 0.0001 * (k + 1)  # noqa: E731  verify: 1 ms + 0.1 ms per position
STEEP = lambda k: 0.001 + 0.004 * (k + 1)  # noqa: E731  verify: 1 ms + 4 ms per position


def best_k(protocol: str, csi: CSI, alpha: float, verify=CHEAP, k_max: int = 32) -> int:
    return choose_k(round_cost(protocol, csi, PB, TAU_D, verify), alpha, 1, k_max).k


def test_expected_committed_by_hand():
    assert expected_committed([]) == 1.0
    assert expected_committed([0.5, 0.5]) == pytest.approx(1 + 0.5 + 0.25)
    assert expected_committed([1.0, 0.0, 1.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        expected_committed([1.5])


def test_choose_k_minimises_time_per_token_by_hand():
    # round = 1 + K seconds, every token accepted: cost (1 + K) / (1 + K) = 1 for all K -> ties go to the smallest
    assert choose_k(lambda k: 1.0 + k, 1.0, 1, 8).k == 1
    # round = 10 + K, every token accepted: (10 + K) / (1 + K) falls with K -> the largest
    c = choose_k(lambda k: 10.0 + k, 1.0, 1, 8)
    assert c.k == 8 and c.s_per_token == pytest.approx(18 / 9) and c.committed == pytest.approx(9)


@pytest.mark.parametrize("case, k_big, k_small", [
    # a long RTT and a cheap verify give a large K; a short RTT a smaller one
    ("long RTT, cheap verify", ("greedy", CSI.symmetric(200, 100), 0.85), ("greedy", CSI.symmetric(200, 1), 0.85)),
    # a slow uplink with FH (32 kbit per token) gives a smaller K than the same uplink with greedy's ids
    ("slow uplink, fh vs greedy", ("greedy", CSI.symmetric(3, 60), 0.85), ("fh", CSI.symmetric(3, 60), 0.85)),
    # ... and than FH on a fast uplink
    ("slow uplink, fh fast vs slow", ("fh", CSI.symmetric(200, 60), 0.85), ("fh", CSI.symmetric(3, 60), 0.85)),
    # a drafter that is rarely right gives a small K
    ("rarely right drafter", ("greedy", CSI.symmetric(20, 20), 0.9), ("greedy", CSI.symmetric(20, 20), 0.1)),
])
def test_hand_built_cases(case, k_big, k_small):
    big, small = best_k(*k_big), best_k(*k_small)
    assert big > small, f"{case}: K {big} should exceed K {small}"


def test_absolute_ends():
    assert best_k("greedy", CSI.symmetric(200, 100), 0.85) >= 12  # long RTT, cheap verify: a large K
    assert best_k("greedy", CSI.symmetric(20, 20), 0.05) <= 2  # rarely right: a small K
    # a verify that grows steeply with the positions gives a smaller K than a cheap one on the same link
    assert best_k("greedy", CSI.symmetric(200, 60), 0.85, verify=STEEP) < best_k("greedy", CSI.symmetric(200, 60), 0.85)


def test_history_alpha_and_calibration():
    h = AcceptanceHistory(prior_tokens=0.0, decay=1.0)
    h = update_history(h, 4, 2, [0.95, 0.95, 0.2, 0.1])  # 2 accepted, token 3 rejected (token 4 undecided)
    h = update_history(h, 3, 3, [0.95, 0.95, 0.95])  # all accepted (censored: no rejection)
    assert h.alpha == pytest.approx(5 / 6)
    assert h.p_token(0.99) == pytest.approx(1.0)  # 5 of 5 high-confidence tokens accepted
    assert h.p_token(0.25) == pytest.approx(0.0)  # the one low-confidence decided token was rejected
    assert h.p_token(None) == h.alpha
    with pytest.raises(ValueError):
        update_history(h, 2, 3)


def test_history_prior_and_decay():
    h = AcceptanceHistory(prior_alpha=0.5, prior_tokens=2.0, decay=0.5)
    assert h.alpha == 0.5
    h = update_history(update_history(h, 4, 0), 4, 4)  # old rejection decays to 0.5
    assert h.alpha == pytest.approx((4 + 1) / (4 + 0.5 + 2))


def test_keep_drafting():
    assert keep_drafting(0.9, 0.9, tokens_per_s=100, marginal_s=0.002)  # 0.81 >= 0.2
    assert not keep_drafting(0.3, 0.5, tokens_per_s=100, marginal_s=0.002)  # 0.15 < 0.2


def test_verify_fit_recovers_a_line():
    fit = VerifyFit(decay=1.0)
    assert fit.predict_s(8) == 0.0
    fit = update_verify(fit, 4, 0.010)
    assert fit.predict_s(30) == pytest.approx(0.010)  # one window size seen: flat
    for k in (2, 8, 16, 4):
        fit = update_verify(fit, k, 0.005 + 0.001 * (k + 1))
    fit = update_verify(VerifyFit(decay=1.0), 2, 0.008)
    for k in (8, 16):
        fit = update_verify(fit, k, 0.005 + 0.001 * (k + 1))
    assert fit.predict_s(32) == pytest.approx(0.005 + 0.001 * 33)


def _learn_live_rounds(w: WindowTracker, csi: CSI, fixed_draft_s: float, host_s: float, edge_s: float) -> None:
    """Rounds measured as this CPU's were: drafting ``fixed + 1.2 ms K``, a flat edge time, a host overhead the link
    model does not hold; K alternating 6 and 9 as the auto window's choices do."""
    for i in range(40):
        k = (6, 9)[i % 2]
        t_draft = fixed_draft_s + 0.0012 * k
        w.round_s("greedy", csi, PB)  # the sizer sets the link model of the round in flight
        t_round = t_draft + w.link_s(k) + edge_s + host_s
        w.update(k, k - 1, None, t_draft, edge_s, t_round_s=t_round)


def test_tracker_predicts_the_measured_round_with_its_fixed_costs():
    # the drafter's fixed cost per block (its catch-up forward) and the host's overhead are what a per-token tau_d and
    # the link model alone leave out: the tracker's round time must equal what the rounds measured
    csi = CSI(200.0, 200.0, 5.0)
    w = WindowTracker()
    _learn_live_rounds(w, csi, fixed_draft_s=0.0022, host_s=0.0026, edge_s=0.0068)
    predicted = w.round_s("greedy", csi, PB)
    for k in (4, 8, 16):
        truth = 0.0022 + 0.0012 * k + w.link_s(k) + 0.0068 + 0.0026
        assert predicted(k) == pytest.approx(truth, rel=0.02)
    assert w.overhead_s(w.link_s(8)) == pytest.approx(0.0026, rel=0.02)


def test_fixed_costs_push_the_window_up():
    # the same rounds priced the old way (K tau_d, no overhead) choose a smaller K than the measured costs do
    csi = CSI(200.0, 200.0, 5.0)
    w = WindowTracker()
    _learn_live_rounds(w, csi, fixed_draft_s=0.0022, host_s=0.0026, edge_s=0.0068)
    old = choose_k(round_cost("greedy", csi, PB, w.tau_d_s, w.verify.predict_s), w.history.alpha).k
    new = w.choose(w.round_s("greedy", csi, PB)).k
    assert new > old


def test_the_overhead_follows_the_link_state_at_once():
    # a host overhead that grows with the link (the emulator's framing): learnt over both states of a trace, the
    # overhead of each state is predicted right on the first round after a switch, not an average lagging behind
    w = WindowTracker()
    fast, slow = CSI(120.0, 120.0, 6.0), CSI(4.0, 4.0, 70.0)
    for i in range(60):
        csi = fast if (i // 10) % 2 == 0 else slow
        w.round_s("greedy", csi, PB)
        link = w.link_s(8)
        w.update(8, 6, None, 0.012, 0.007, t_round_s=0.012 + 0.007 + link + 0.002 + 0.1 * link)
    for csi in (fast, slow):
        w.round_s("greedy", csi, PB)
        assert w.overhead_s(w.link_s(8)) == pytest.approx(0.002 + 0.1 * w.link_s(8), rel=0.03)


def test_a_prefilled_block_sets_the_drafting_time_only_until_a_clean_one_replaces_it():
    """A prompt's first block pays the drafter's prefill of the prompt: no cost per drafted token.  It sets tau_d
    while nothing else has; the first block without a prefill replaces it (no blend); later prefilled blocks teach
    drafting nothing, and the drafting line never sees them."""
    w = WindowTracker()
    w.update(8, 1, t_draft_s=0.016, prefilled=True)  # 2 ms a token, the prefill in it
    assert w.tau_d_s == pytest.approx(0.002) and w.tau_from_prefill
    w.update(8, 7, t_draft_s=0.008)  # 1 ms a token: replaces, does not blend
    assert w.tau_d_s == pytest.approx(0.001) and not w.tau_from_prefill
    assert w.prefill_s == 0.0  # the first prefill came before drafting was known: not priced
    w.update(8, 1, t_draft_s=0.040, prefilled=True)  # the next prompt's first block: no drafting time ...
    assert w.tau_d_s == pytest.approx(0.001) and not w.tau_from_prefill
    assert w.prefill_s == pytest.approx(0.032)  # ... but the prefill: 40 ms less 8 tokens at 1 ms
    w.update(4, 3, t_draft_s=0.006)
    assert w.tau_d_s == pytest.approx(0.001 + 0.3 * (0.0015 - 0.001))  # blended as before
    assert w.drafting.has_slope and w.drafting.at(8.0) == pytest.approx(0.008)  # the line: the two clean blocks


def test_a_timed_prefill_leaves_the_first_block_clean_drafting():
    """Where the drafter timed its read of the prompt (the forward that also gave the first token), the block's
    other tokens are clean drafting at once (auto may choose after a prompt's first block), and the read beyond
    one token's drafting is the prefill; a read too short to split, or a one-token block, falls back to the rule
    above."""
    w = WindowTracker()
    w.update(8, 1, t_draft_s=0.030, prefilled=True, t_prefill_s=0.016)  # 7 tokens in 14 ms after a 16 ms read
    assert w.tau_d_s == pytest.approx(0.002) and not w.tau_from_prefill
    assert w.prefill_s == pytest.approx(0.014)  # the read less the first token's drafting
    assert not w.drafting.n  # the line sees only blocks with no prefill in them
    w.update(8, 1, t_draft_s=0.030, prefilled=True, t_prefill_s=0.020)  # 7 tokens in 10 ms
    assert w.tau_d_s == pytest.approx(0.002 + 0.3 * (0.010 / 7 - 0.002))
    assert w.prefill_s == pytest.approx(0.014 + 0.3 * (0.020 - w.tau_d_s - 0.014))
    v = WindowTracker()
    v.update(1, 1, t_draft_s=0.016, prefilled=True, t_prefill_s=0.016)  # nothing drafted after the read
    assert v.tau_d_s == pytest.approx(0.016) and v.tau_from_prefill
