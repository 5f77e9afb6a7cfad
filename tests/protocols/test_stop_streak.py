"""The lookup stop's streak priced by what the lookup matched after each streak (wisv/timing/stopstreak.py,
wisv.decoding.ngram.streak_yields), and a UE that adapts it through the in-process loopback."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from protocols.ue_handover import EdgeRound, UERun, generate_message, lookup_choice
from protocols.ue_side import UEParams
from tests.protocols.test_handover_sessions import POOR, play
from tests.protocols.test_lookup_stop import lookup_pair
from tests.protocols.test_sessions import PROMPTS, pair, reference  # noqa: F401 (fixture)
from wisv.decoding.ngram import NgramConfig, propose, streak_yields
from wisv.timing.check import StopGain
from wisv.timing.handover import HandOver
from wisv.timing.stopstreak import StreakYield, learn_streak_yield, stop_streak, yield_pays
from wisv.timing.window import WindowTracker


def test_streak_yields_by_hand():
    """Context 1 2 3 9, output 1 2 3 1 2: lookup (1-gram) proposes after each token; streak and match by hand."""
    cfg = NgramConfig(1, 1, 3)
    got = streak_yields([1, 2, 3, 9], [1, 2, 3, 1, 2], cfg, cap=2)
    # after 9: no match.  After 1 (9 1? no: suffix 1 occurs at 0) proposes 2 3 9: output 2 3 1 -> 2 matched,
    # streak 0 (nothing proposed before 1).  After 2: proposes 3 9 1 -> 3 1 2: 1; streak 1 (2 was named).
    # After 3: its earliest earlier 3 is followed by 9 1 2 -> 1 2: 0 matched (9 != 1); streak 2.
    # After 1 (the second): earliest 1 is followed by 2 3 9 -> 2: 1 matched (the output ends); streak 0 (1 != 9).
    assert got == [(0, 2), (1, 1), (2, 0), (0, 1)]
    assert propose([1, 2, 3, 9, 1], cfg) == [2, 3, 9]
    capped = streak_yields([5, 5, 5, 5], [5, 5, 5], NgramConfig(1, 1, 2), cap=1)
    assert [s for s, _ in capped] == [0, 1, 1]


def test_the_yield_decays_per_prompt_and_caps_its_streaks():
    y = learn_streak_yield(StreakYield(), [(0, 2), (1, 4), (5, 6)], cap=2)
    assert y.positions == (1.0, 1.0, 1.0) and y.matched == (2.0, 4.0, 6.0)
    y = learn_streak_yield(y, [(2, 0), (2, 0)], cap=2)
    assert y.positions == pytest.approx((0.8, 0.8, 2.8)) and y.matched == pytest.approx((1.6, 3.2, 4.8))
    assert y.mean(2) is None and y.mean(2, min_count=2) == pytest.approx(4.8 / 2.8) and y.mean(7) is None
    with pytest.raises(ValueError):
        learn_streak_yield(y, [], cap=0)


def yields(means: list[float], n: float = 10.0) -> StreakYield:
    return StreakYield(tuple(n for _ in means), tuple(n * m for m in means))


def test_the_stop_waits_for_the_shortest_streak_that_pays_at_the_link():
    """Streaks 0-3 match 1, 2.7, 3.1, 3.8 tokens; a round after a stop takes 0.2 s plus the link's RTT, the edge
    0.085 s a token.  At 20 ms streak 1 pays (3.7 tokens = 0.31 s > 0.24 s); at 100 ms only 3 does (4.8 x 0.085
    = 0.41 s > 0.4 s); at 200 ms none: no stop, until the re-probe asks for the longest."""
    y = yields([1.0, 2.7, 3.1, 3.8])
    assert stop_streak(y, 0.22, 0.02, 0.085, cap=3) == 1
    assert stop_streak(y, 0.30, 0.10, 0.085, cap=3) == 3
    assert stop_streak(y, 0.40, 0.20, 0.085, cap=3) == 0
    assert stop_streak(y, 0.40, 0.20, 0.085, cap=3, reprobe=True) == 3
    assert stop_streak(y, None, 0.02, 0.085, cap=3) == 3  # no round after a stop measured yet: the longest
    assert stop_streak(y, 0.22, 0.02, 0.085, cap=2) == 1
    thin = StreakYield((10.0, 1.0, 10.0, 10.0), (10.0, 2.7, 31.0, 38.0))  # streak 1 seen once: unknown
    assert stop_streak(thin, 0.30, 0.10, 0.085, cap=3) == 3
    assert stop_streak(thin, 0.22, 0.02, 0.085, cap=3) == 2  # the shortest measured one that pays
    assert yield_pays(thin, 1, 0.22, 0.02, 0.085) is None and yield_pays(y, 0, 0.22, 0.02, 0.085) is False
    with pytest.raises(ValueError):
        stop_streak(y, 0.2, 0.02, 0.085, cap=0)


def test_an_adapting_ue_stays_lossless_learns_the_yield_and_asks_for_streaks_it_priced(pair):
    """auto with prompt lookup, the stop adapted up to 3, on a poor link, two prompts sharing the UE's tracker: the
    outputs are the target's, the first prompt's output teaches the yield, and every stop asked for waits for a
    streak in 1..3."""
    prompt = PROMPTS[1] * 2
    edge, ue = lookup_pair(pair, prompt, 3)
    ue.p = UEParams(**{**vars(ue.p), "lookup_stop_adapt": True})
    play(edge, ue, POOR)
    ue.follow_last()
    assert ue.tokens == reference(pair, prompt).tokens
    assert sum(ue.window.streak_yield.positions) > 0  # learnt from the output, off the prompt's latency
    before = ue.window.streak_yield
    edge2, ue2 = lookup_pair(pair, prompt, 3)
    ue2.p, ue2.window = ue.p, ue.window
    rounds = play(edge2, ue2, POOR)
    assert ue2.tokens == reference(pair, prompt).tokens
    asked = [r.choice.stop_streak for r in rounds if isinstance(r, EdgeRound) and r.choice.stop]
    assert asked and all(1 <= s <= 3 for s in asked)
    assert ue2.window.streak_yield == before  # the second prompt's yield is learnt only at its end
    ue2.follow_last()
    assert ue2.window.streak_yield != before


def adapting(seq: list[int], y: StreakYield, gain: StopGain, agrees: bool = False) -> SimpleNamespace:
    window = WindowTracker(8)
    window.streak_yield, window.stop_gain = y, gain
    params = UEParams(protocol="auto", lookup_stop_streak=3, lookup_stop_adapt=True)
    return SimpleNamespace(window=window, p=params, d=SimpleNamespace(seq=seq), unfollowed=[], lookup_agrees=agrees)


def test_a_proposal_after_the_ues_own_streak_is_priced_by_that_streaks_yield():
    """The output ends 1 2 3 after an earlier 1 2 3 4: the lookup (1-3-grams) named the last 2 tokens (2 and 3) and
    proposes 4.  Where streak 2's proposals matched 5 tokens a round after a stop pays, and the UE speculates though
    the costs chose the edge; where they matched none it does not, though the costs chose speculation, and the
    run it hands over asks for the streak that pays (1)."""
    cfg, seq = NgramConfig(1, 3, 4), [1, 2, 3, 4, 1, 2, 3]
    edge, spec = HandOver(True, 16, 0.09, 0.08), HandOver(False, 16, 0.07, 0.08)
    rich = adapting(seq, yields([0.0, 5.0, 5.0, 5.0]), StopGain(6.0, 0.2, 1.0))
    got = lookup_choice(rich, edge, cfg, 0.02, 0.085)
    assert not got.edge_alone and not got.stop
    poor = adapting(seq, yields([0.0, 3.0, 0.0, 0.0]), StopGain(6.0, 0.2, 1.0))
    got = lookup_choice(poor, spec, cfg, 0.02, 0.085)
    assert got.edge_alone and got.stop and got.stop_streak == 1
    stopped = lookup_choice(adapting(seq, yields([0.0, 0.0, 0.0, 0.0]), StopGain(6.0, 0.2, 1.0), True), edge, cfg,
                            0.02, 0.085)
    assert not stopped.edge_alone and stopped.lookup  # right after a stop: speculate, as without adapting


def test_the_generate_carries_the_streak_its_run_was_asked_with(pair):
    edge, ue = lookup_pair(pair, PROMPTS[1] * 2, 3)
    ue.run = UERun(HandOver(True, 8, 0.1, 0.1, stop=True, stop_streak=2), 8, None, 0.0)
    assert generate_message(ue).header["stop_streak"] == 2
    ue.run = UERun(HandOver(True, 8, 0.1, 0.1), 8, None, 0.0)
    assert "stop_streak" not in generate_message(ue).header
