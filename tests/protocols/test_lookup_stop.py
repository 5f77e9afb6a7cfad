"""The lookup stop of a handed-over run (protocols/edge_run.py, protocols/ue_handover.py): the edge ends auto's run
where the UE's prompt lookup named the last tokens, flags its part ``stopped``, and the UE speculates; the wire
checks GENERATE's stop fields, and the output stays the target's."""
from __future__ import annotations

from dataclasses import replace

import pytest

from protocols.edge_side import EdgeSession
from protocols.errors import WireError
from protocols.msgchecks import LOOKUP_STOP
from protocols.registry import servable
from protocols.ue_handover import EdgeRound, UERun, generate_message, lookup_fields
from protocols.ue_side import UEParams, UESession
from protocols.wire import MsgType, decode, encode, make
from tests.protocols.test_handover_sessions import POOR, drain, play
from tests.protocols.test_sessions import EOS, LIMITS, PROMPTS, pair, reference, wire  # noqa: F401 (fixture)
from wisv.decoding.ngram import NgramConfig, NgramDraftSession, agree_streak, propose
from wisv.decoding.sessions import VerifySession
from wisv.head.policy import RejectAll
from wisv.timing.check import StopGain, learn_stop_gain
from wisv.timing.handover import STOP_REPROBE_TOKENS, HandOver, lookup_led, next_backoff, stop_pays

STOP = {"prompt_lookup_min": 1, "prompt_lookup_max": 3, "stop_streak": 2}


def test_agree_streak_counts_the_tokens_in_a_row_the_lookup_named_first():
    cfg = NgramConfig(1, 2, 5)
    # after [1, 2] the lookup names 3 (after the earlier 1, 2), then 9 after [2, 3]; 7 breaks it, then nothing matches
    ctx = [1, 2, 3, 9, 1, 2]
    assert agree_streak(ctx, [3, 9], cfg) == 2 and agree_streak(ctx, [3, 9], cfg, streak=4) == 6
    assert agree_streak(ctx, [3, 7], cfg, streak=4) == 0 and agree_streak(ctx, [], cfg, streak=3) == 3
    assert agree_streak([5, 6], [7], cfg) == 0  # no match: no proposal, no streak
    assert agree_streak(ctx, [3, 9, 1], cfg) == 3  # the output copies the prompt: each next token named


def test_the_ue_asks_for_a_stop_only_with_a_lookup_and_a_streak():
    cfg = NgramConfig(2, 4, 10)
    assert lookup_fields(cfg, 3) == {"prompt_lookup_min": 2, "prompt_lookup_max": 4, "stop_streak": 3}
    assert lookup_fields(cfg, 0) == {} and lookup_fields(None, 3) == {}  # off, or a model's drafts


@pytest.mark.parametrize("fields", [
    {"prompt_lookup_min": 1, "prompt_lookup_max": 3},  # no streak
    {"stop_streak": 2},  # no rule
    {**STOP, "prompt_lookup_min": 4},  # min > max
    {**STOP, "prompt_lookup_max": 17},  # past the longest n-gram the edge matches
    {**STOP, "prompt_lookup_min": 0},
    {**STOP, "stop_streak": 0},
    {**STOP, "stop_streak": 2.0},
])
def test_a_generate_with_a_bad_lookup_stop_is_refused(fields):
    with pytest.raises(WireError):
        decode(encode(make(MsgType.GENERATE, "s", None, round=0, tokens=8, **fields)), LIMITS)


def test_a_lookup_stop_needs_a_handed_over_round():
    with pytest.raises(WireError, match="all three or none"):
        decode(encode(make(MsgType.GENERATE, "s", None, round=0, **STOP)), LIMITS)
    got = decode(encode(make(MsgType.GENERATE, "s", None, round=0, tokens=8, **STOP)), LIMITS)
    assert {k: got.header[k] for k in LOOKUP_STOP} == STOP


def lookup_pair(pair, prompt: list[int], streak: int) -> tuple[EdgeSession, UESession]:
    _, target = pair
    params = UEParams(protocol="auto", draft_len=4, max_new_tokens=40, lookup_stop_streak=streak)
    ue = UESession("ue-0", NgramDraftSession(prompt, NgramConfig(1, 3, 4)), params, EOS)
    edge = EdgeSession("ue-0", VerifySession(target, prompt), wire(ue.open_message()), RejectAll(), 0.5, EOS)
    ue.servable = servable(False)  # as OPEN_OK from an edge whose head reads no drafter hidden states says
    return edge, ue


def test_the_edge_ends_a_run_where_the_lookup_names_the_tokens(pair):
    """A run of 30 tokens with a streak of 1: it stops at the first token the lookup named first (the same rule on the
    same tokens as the UE's), short of 30, its last part flagged; without the stop it runs on."""
    prompt = PROMPTS[1] * 2
    ref = reference(pair, prompt).tokens
    cfg = NgramConfig(1, 3)
    named = [bool(propose(prompt + ref[:i], cfg, 1)) and propose(prompt + ref[:i], cfg, 1)[0] == ref[i]
             for i in range(30)]
    first = named.index(True)
    assert 0 < first < 29  # the test's premise: the toy target's output copies its prompt somewhere, not at once
    edge, ue = lookup_pair(pair, prompt, 1)
    edge.on_generate(wire(make(MsgType.GENERATE, ue.sid, None, round=0, tokens=30, **STOP | {"stop_streak": 1},
                               **ue.token)))
    parts = drain(edge)
    got = [t for p in parts for t in p.tensors["tokens"].tolist()]
    assert got == ref[: first + 1] and len(got) < 30
    assert parts[-1].header["stopped"] and not parts[-1].header["done"] and not edge.streaming
    assert all("stopped" not in p.header for p in parts[:-1])
    plain, ue2 = lookup_pair(pair, prompt, 0)
    plain.on_generate(wire(make(MsgType.GENERATE, ue2.sid, None, round=0, tokens=30, **ue2.token)))
    assert [t for p in drain(plain) for t in p.tensors["tokens"].tolist()] == ref[:30]


def test_auto_speculates_after_a_stopped_run_and_stays_lossless(pair):
    """auto with prompt lookup and a streak of 1 on a poor link: some run stops where the lookup agrees again, the
    round after it speculates, and the output is the target's."""
    prompt = PROMPTS[1] * 2
    edge, ue = lookup_pair(pair, prompt, 1)
    rounds = play(edge, ue, POOR)
    stops = [i for i, r in enumerate(rounds) if isinstance(r, EdgeRound) and r.stopped]
    assert stops and ue.tokens == reference(pair, prompt).tokens
    after = [rounds[i + 1] for i in stops if i + 1 < len(rounds)]
    assert after and all(r.choice.lookup for r in after)  # the lookup chose: speculate, or (nothing to propose
    assert any(not isinstance(r, EdgeRound) for r in after)  # after all) the edge again
    assert edge.generated == len(ue.tokens)
    assert ue.window.stop_gain.rounds > 0  # what the rounds after a stop committed, for the next run's stop
    assert all(r.choice.stop_streak == 1 for r in rounds if isinstance(r, EdgeRound) and r.choice.stop)


def test_the_generate_carries_the_streak_its_run_was_asked_with(pair):
    """The run's own streak goes out (and is recorded, ``lookup_stop_streak``); a run that did not ask, none."""
    edge, ue = lookup_pair(pair, PROMPTS[1] * 2, 3)
    ue.run = UERun(HandOver(True, 8, 0.1, 0.1, stop=True, stop_streak=2), 8, None, 0.0)
    assert generate_message(ue).header["stop_streak"] == 2
    ue.run = UERun(HandOver(True, 8, 0.1, 0.1), 8, None, 0.0)
    assert "stop_streak" not in generate_message(ue).header


def test_the_lookup_leads_the_choice_where_it_knows_better_than_the_costs():
    edge, spec = HandOver(True, 32, 0.0050, 0.0045), HandOver(False, 32, 0.0040, 0.0045, probe=True)
    for c in (edge, spec):
        resumed, idle = lookup_led(c, True, True, True), lookup_led(c, False, False, True)
        assert not resumed.edge_alone and resumed.lookup and not resumed.probe and resumed.tokens == 32
        assert idle.edge_alone and idle.lookup and not idle.probe and idle.stop  # no proposal: a decode step a round
        assert lookup_led(c, True, False, True).edge_alone  # stopped, but nothing to draft: the edge
        assert lookup_led(c, False, True, True) == replace(c, stop=c.edge_alone)  # a proposal: the costs choose
        assert not lookup_led(c, False, False, False).stop  # a stop that does not pay is not asked for
    assert next_backoff(3, lookup_led(edge, True, True, True)) == 3  # not a round speculation won on its costs


def test_a_stop_is_asked_for_while_the_rounds_after_it_pay_for_their_hand_back():
    """Unmeasured: try it.  Then the round after a stop (0.2 s, measured) and the hand-back (a round trip) against
    the edge's time for the tokens such a round commits (4 at 0.075 s = 0.3 s): paid over 20 ms, not over 150 ms."""
    assert stop_pays(StopGain(), 1.0, 0.001)
    gain = learn_stop_gain(learn_stop_gain(StopGain(), 3, 0.1), 5, 0.3)
    assert gain.mean_tokens == pytest.approx((0.8 * 3 + 5) / 1.8) and gain.mean_s == pytest.approx(0.38 / 1.8)
    four = StopGain(4.0, 0.2, 1.0)
    assert stop_pays(four, 0.02, 0.075) and not stop_pays(four, 0.15, 0.075)
    assert not stop_pays(four, 0.15, 0.075, STOP_REPROBE_TOKENS - 1)  # the edge's tokens since it was last asked
    assert stop_pays(four, 0.15, 0.075, STOP_REPROBE_TOKENS)  # ... enough: measured again
    with pytest.raises(ValueError):
        learn_stop_gain(four, -1, 0.1)
    with pytest.raises(ValueError):
        learn_stop_gain(four, 1, float("nan"))
