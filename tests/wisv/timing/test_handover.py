"""Speculate or hand the round to the edge (wisv/timing/handover.py), on hand-built costs."""
import pytest

from wisv.timing.handover import (
    REPROBE_ROUNDS,
    SPEC_REPROBE_TOKENS,
    HandOver,
    agreement_history,
    choose_round,
    chunk_sizes,
    edge_alone_s_per_token,
    next_backoff,
    probe,
    should_probe,
    should_speculate,
    spec_probe,
    spec_reprobe_tokens,
)
from wisv.timing.window import AcceptanceHistory

LINK = lambda rtt_s: (lambda n: rtt_s + n * 1e-5)  # noqa: E731  a chunk's link time: one RTT plus 10 us per token


def test_edge_alone_cost_by_hand():
    assert edge_alone_s_per_token(0.007, 16, 0.064, 0.002) == pytest.approx(0.007 + 0.066 / 16)
    with pytest.raises(ValueError):
        edge_alone_s_per_token(0.007, 0, 0.06)


def test_a_good_drafter_on_a_good_link_speculates():
    # toy pair at 200 Mbit/s / 5 ms: 4.2 ms per committed token speculating, the edge 6.8 ms per token alone
    c = choose_round(0.0042, 0.0068, LINK(0.005), budget_tokens=100)
    assert not c.edge_alone and c.tokens == 16 and c.edge_s_per_token == pytest.approx(0.0068 + 0.00516 / 16)


def test_a_poor_link_hands_the_round_to_the_edge():
    # 3 Mbit/s / 60 ms: speculation's round trip per ~9 tokens costs 11.7 ms a token; the edge's 16 tokens per
    # round trip cost 6.8 + 60/16 = 10.6 ms a token
    c = choose_round(0.0117, 0.0068, LINK(0.060), budget_tokens=100)
    assert c.edge_alone and c.edge_s_per_token < c.spec_s_per_token


def test_a_drafter_that_rarely_agrees_hands_over_even_on_a_good_link():
    assert choose_round(0.012, 0.0068, LINK(0.005), budget_tokens=100).edge_alone


def test_the_margin_keeps_a_near_tie_speculating_and_the_budget_caps_the_chunk():
    near = choose_round(0.0100, 0.0098, LINK(0.0), budget_tokens=100)
    assert not near.edge_alone  # 2% cheaper is within the 5% margin
    assert choose_round(0.0100, 0.0098, LINK(0.0), budget_tokens=100, margin=0.0).edge_alone
    small = choose_round(0.0117, 0.0068, LINK(0.060), budget_tokens=3)
    assert small.tokens == 3 and not small.edge_alone  # 3 tokens cannot pay for the round trip


def test_chunk_sizes_double_up_to_the_budget():
    assert chunk_sizes(16, 100) == [16, 32, 64, 100]
    assert chunk_sizes(16, 64) == [16, 32, 64]
    assert chunk_sizes(16, 3) == [3] and chunk_sizes(32, 0) == [1]


def test_a_longer_chunk_takes_the_round_when_a_short_one_cannot_pay_its_round_trip():
    # the toy pair at 20 Mbit/s / 20 ms, the edge 2.9 ms a token alone, speculation 3.8 ms a committed token (near:
    # within 1.25x of the cheapest chunk); 16 tokens pay 2.9 + 22/16 = 4.3 ms (not 5% under 3.8), 32 tokens 3.6 ms,
    # 64 3.25 ms, 150 3.05 ms: the smallest within 10% of the cheapest is 64
    c = choose_round(0.0038, 0.0029, LINK(0.022), budget_tokens=150)
    assert c.edge_alone and c.tokens == 64 and c.edge_s_per_token == pytest.approx(0.0029 + 0.02264 / 64)
    # over a 50 ms RTT the round trip weighs more: 128 tokens (3.30 ms, within 10% of the budget's 3.24) not 64 (3.69)
    assert choose_round(0.0040, 0.0029, LINK(0.050), budget_tokens=150).tokens == 128
    # over a short RTT the first chunk that pays is near the cheapest: it stays small
    assert choose_round(0.0036, 0.0029, LINK(0.002), budget_tokens=150).tokens == 16
    # speculation far dearer (4.5 ms, 1.47x the cheapest): no return is near, the cheapest chunk, the whole budget
    assert choose_round(0.0045, 0.0029, LINK(0.022), budget_tokens=150).tokens == 150
    assert choose_round(0.0045, 0.0029, LINK(0.002), budget_tokens=150).tokens == 150
    # the overhead may depend on the chunk: a large one per token keeps every chunk speculating
    assert not choose_round(0.0045, 0.0029, LINK(0.022), 150, overhead_s=lambda n: 0.002 * n).edge_alone
    # an edge slower per token than speculation never takes the round, however long the chunk
    assert not choose_round(0.0045, 0.0046, LINK(0.0), budget_tokens=10_000).edge_alone


def test_the_edge_is_probed_once_while_its_guess_is_near():
    # before any chunk the guess is the edge's verify pass over K + 1 positions: 7.5 ms a token against 5.1 ms
    # speculating on the toy pair, 1.5 times; the edge alone really takes 2.9 ms
    c = choose_round(0.0051, 0.0062, LINK(0.022), budget_tokens=150)
    assert not c.edge_alone
    assert should_probe(c, None) and not should_probe(c, 0)
    assert not should_probe(c, None, factor=1.2)  # too far off for that factor
    near = c.edge_s_per_token / c.spec_s_per_token
    assert should_probe(c, REPROBE_ROUNDS, reprobe_factor=near + 0.1)  # measured long ago and near: again
    assert not should_probe(c, REPROBE_ROUNDS - 1, reprobe_factor=near + 0.1)  # not yet
    assert not should_probe(c, 10 * REPROBE_ROUNDS, reprobe_factor=max(1.0, near - 0.1))  # too far off
    p = probe(c)
    assert p.edge_alone and p.probe and p.tokens == c.tokens == 16 and not c.probe
    assert not should_probe(choose_round(0.0117, 0.0068, LINK(0.060), 100), None)  # already handed over
    with pytest.raises(ValueError):
        should_probe(c, None, factor=0.5)


def test_agreement_over_a_chunk_moves_alpha_both_ways():
    h = AcceptanceHistory(accepted=2.0, rejected=4.0)
    up = agreement_history(h, [True] * 16)
    down = agreement_history(h, [True, False, False, False] * 4)
    assert up.alpha > h.alpha > down.alpha
    assert up.accepted == pytest.approx(0.9 * 2 + 16) and down.rejected == pytest.approx(0.9 * 4 + 12)
    assert agreement_history(h, []).alpha == pytest.approx(AcceptanceHistory(1.8, 3.6).alpha)


def test_a_drafter_that_agrees_again_brings_speculation_back():
    # handed over while alpha was low; chunks the drafter agrees with raise alpha, and the speculative cost
    # predicted from it falls below the edge's
    from wisv.timing.window import choose_k
    round_s = lambda k: 0.012 + 0.0012 * k  # noqa: E731  drafting, link (5 ms), edge and overhead
    h = AcceptanceHistory(accepted=1.0, rejected=6.0)
    before = choose_round(choose_k(round_s, h.alpha).s_per_token, 0.0068, LINK(0.005), 100)
    for _ in range(3):
        h = agreement_history(h, [True] * 16)
    after = choose_round(choose_k(round_s, h.alpha).s_per_token, 0.0068, LINK(0.005), 100)
    assert before.edge_alone and not after.edge_alone


def test_the_run_summary_counts_the_edges_rounds():
    import pandas as pd

    from testbed.common.summary import handover_table
    rounds = pd.DataFrame({"edge_alone": [False, True, True, False], "committed": [5, 16, 16, 3],
                           "rtt_ms": [5.0, 60.0, 60.0, 5.0], "rate_up_mbps": [200.0, 3.0, 3.0, 200.0]})
    text = handover_table("auto", rounds)
    assert "2 of 4 rounds by the edge alone, 32 of 40 tokens" in text
    assert "link 3 Mbps / 60 ms: 2 of 2 rounds" in text and "link 200 Mbps / 5 ms: 0 of 2 rounds" in text
    assert handover_table("greedy", rounds.assign(edge_alone=None)) is None


def test_a_chunk_arrives_well_within_the_reply_timeout():
    from wisv.timing.handover import REPLY_SHARE, max_chunk_tokens
    assert max_chunk_tokens(0.05, 10.0) == int(REPLY_SHARE * 10.0 / 0.05) == 50  # 2.5 s of 50 ms tokens
    assert max_chunk_tokens(20.0, 10.0) == 1  # a token slower than the share: still one token a round
    assert max_chunk_tokens(0.05, None) is None  # no timeout, no bound
    assert max_chunk_tokens(0.0, 10.0) is None  # nothing measured to bound by
    with pytest.raises(ValueError):
        max_chunk_tokens(0.05, 0.0)


def test_speculation_is_measured_again_after_a_run_of_the_edges_tokens():
    """After SPEC_REPROBE_TOKENS the edge generated alone, a hand-over whose speculation is within 1.5x speculates
    once (a probe); not before, not when speculation is far dearer, and never when the choice speculates anyway."""
    near = HandOver(True, 32, spec_s_per_token=0.0050, edge_s_per_token=0.0045)
    far = HandOver(True, 32, spec_s_per_token=0.0100, edge_s_per_token=0.0045)
    assert not should_speculate(near, SPEC_REPROBE_TOKENS - 1)
    assert should_speculate(near, SPEC_REPROBE_TOKENS)
    assert not should_speculate(far, 10 * SPEC_REPROBE_TOKENS)  # 2.2x: not worth a round
    assert not should_speculate(HandOver(False, 16, 0.004, 0.005), 10 * SPEC_REPROBE_TOKENS)
    p = spec_probe(near)
    assert not p.edge_alone and p.probe and (p.spec_s_per_token, p.edge_s_per_token) == (0.0050, 0.0045)
    with pytest.raises(ValueError):
        should_speculate(near, 100, tokens=0)


def test_each_probe_that_speculation_does_not_follow_doubles_the_wait():
    """A speculation probe doubles the edge's tokens before the next (up to 8x); a round speculation wins resets the
    wait; the edge's rounds, its probes too, leave it."""
    edge, won = HandOver(True, 32, 0.0050, 0.0045), HandOver(False, 16, 0.004, 0.005)
    b = 0
    for want in (2, 4, 8, 8):
        b = next_backoff(b, spec_probe(edge))
        assert spec_reprobe_tokens(b) == min(want, 8) * SPEC_REPROBE_TOKENS
    assert next_backoff(b, edge) == b and next_backoff(b, probe(won)) == b
    assert next_backoff(b, won) == 0 and spec_reprobe_tokens(0) == SPEC_REPROBE_TOKENS
