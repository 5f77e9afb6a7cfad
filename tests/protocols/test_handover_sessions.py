"""`auto` hands rounds to the edge (protocols/ue_handover.py, EdgeSession.on_generate): the UE and edge sessions
in-process, every message through the wire format; the output stays the target's greedy output."""
from __future__ import annotations

import pytest

from channel.csi import CSI
from protocols.edge_side import EdgeSession
from protocols.errors import ProtocolError
from protocols.ue_handover import EdgeRound, check_spec
from protocols.ue_side import UESession
from protocols.wire import Message, MsgType, make
from tests.protocols.test_sessions import PROMPTS, open_pair, pair, reference, wire  # noqa: F401 (fixture)
from wisv.timing.check import Ratio
from wisv.timing.handover import HandOver
from wisv.timing.window import WindowTracker

POOR = CSI(3.0, 3.0, rtt_ms=60.0)  # a round trip costs ~60 ms: the edge's 16-token chunks amortise it best


class Loopback:
    """The round's link as UESession.play_round uses it: each message goes to the edge session at once."""

    def __init__(self, edge: EdgeSession):
        self.edge, self.out = edge, []

    def send(self, msg: Message) -> None:
        msg = wire(msg)
        handler = {MsgType.DRAFT: self.edge.on_draft, MsgType.GENERATE: self.edge.on_generate,
                   MsgType.HIDDEN: self.edge.on_hidden}[msg.type]
        self.out.append(wire(handler(msg)))

    def reply_waiting(self) -> bool:
        return bool(self.out)

    def replies(self):
        while self.out:
            yield self.out.pop(0)


def play(edge: EdgeSession, ue: UESession, csi: CSI) -> list:
    link, rounds = Loopback(edge), []
    while not ue.done:
        rounds.append(ue.play_round(csi, link))
    return rounds


def test_auto_hands_rounds_to_the_edge_on_a_poor_link_and_stays_lossless(pair) -> None:
    edge, ue = open_pair(pair, PROMPTS[1], protocol="auto", draft_len=4, max_new_tokens=40)
    rounds = play(edge, ue, POOR)
    kinds = [isinstance(r, EdgeRound) for r in rounds]
    assert not kinds[0] and any(kinds)  # the first round speculates (nothing measured), then the edge takes over
    assert ue.tokens == reference(pair, PROMPTS[1]).tokens  # the target's greedy output
    assert edge.done and edge.generated == len(ue.tokens)
    assert ue.window.edge_decode_s is not None and ue.window.edge_decode_s > 0  # learnt from the CHUNKs
    assert ue.d.seq[len(PROMPTS[1]):] + ue.unfollowed == ue.tokens  # the drafter followed every chunk but the last
    assert ue.unfollowed and ue.unfollowed == rounds[-1].tokens  # which waits: the prompt is done
    before = ue.window.history
    ue.follow_last()  # after the last token arrived: the pass over it, for the next prompt's choice
    assert not ue.unfollowed and ue.d.seq[len(PROMPTS[1]):] == ue.tokens and ue.window.history != before
    ue.follow_last()  # nothing pending: nothing to do
    assert ue.d.seq[len(PROMPTS[1]):] == ue.tokens


def test_a_protocol_that_does_not_choose_never_hands_over(pair) -> None:
    edge, ue = open_pair(pair, PROMPTS[1], protocol="greedy", draft_len=4, max_new_tokens=40)
    assert not any(isinstance(r, EdgeRound) for r in play(edge, ue, POOR))
    assert ue.tokens == reference(pair, PROMPTS[1]).tokens


def test_the_edge_replays_a_resent_generate_and_refuses_a_stream_request(pair) -> None:
    edge, ue = open_pair(pair, PROMPTS[1], protocol="auto", draft_len=4, max_new_tokens=40)
    ask = wire(make(MsgType.GENERATE, ue.sid, None, round=0, tokens=5, **ue.token))
    first = edge.on_generate(ask)
    assert edge.on_generate(ask) is first and edge.next_round == 1  # a resend: the same CHUNK, nothing decoded
    assert first.tensors["tokens"].tolist() == reference(pair, PROMPTS[1]).tokens[:5]
    with pytest.raises(ProtocolError, match="without tokens"):
        edge.on_generate(wire(make(MsgType.GENERATE, ue.sid, None, round=1, **ue.token)))


def test_generate_tokens_must_be_positive() -> None:
    from protocols.wire import WireError, decode, encode
    from tests.protocols.test_sessions import LIMITS
    with pytest.raises(WireError):
        decode(encode(make(MsgType.GENERATE, "s", None, round=0, tokens=0)), LIMITS)



def test_a_run_of_the_edges_rounds_doubles_its_chunks(pair) -> None:
    from protocols.ue_handover import chunk_size
    assert [chunk_size(n) for n in (0, 16, 32)] == [16, 32, 64]
    edge, ue = open_pair(pair, PROMPTS[1], protocol="auto", draft_len=4, max_new_tokens=40)
    sizes = [len(r.tokens) for r in play(edge, ue, POOR) if isinstance(r, EdgeRound)]
    assert sizes[0] >= 16 and len(sizes) <= 2  # over the poor link's RTT: chunks of 16 or more, doubling or
    #   larger at once (CHUNK_REACH), never the three or more round trips 16-token chunks would take
    assert ue.tokens == reference(pair, PROMPTS[1]).tokens


def test_the_drafter_follows_a_chunk_while_the_edge_generates_the_next(pair) -> None:
    """After a CHUNK the drafter lags by its tokens (a resumed OPEN still names them); the next round's GENERATE goes
    out first, then the drafter's pass over them, which updates the agreement history."""
    from protocols.ue_handover import follow_chunk
    edge, ue = open_pair(pair, PROMPTS[1], protocol="auto", draft_len=4, max_new_tokens=40)
    link = Loopback(edge)
    rounds = [ue.play_round(POOR, link)]
    while not isinstance(rounds[-1], EdgeRound):
        rounds.append(ue.play_round(POOR, link))
    chunk = rounds[-1].tokens
    assert ue.unfollowed == chunk and ue.d.seq == PROMPTS[1] + ue.tokens[:-len(chunk)]
    assert ue.open_message().tensors["prompt"].tolist() == PROMPTS[1] + ue.tokens  # the whole committed prefix
    seen = ue.window.history
    follow_chunk(ue)
    assert ue.unfollowed == [] and ue.d.seq == PROMPTS[1] + ue.tokens and ue.window.history != seen
    follow_chunk(ue)  # nothing left: no pass
    assert ue.d.seq == PROMPTS[1] + ue.tokens


def test_each_side_checks_its_prediction_against_its_own_rounds(pair) -> None:
    """auto's rounds by the edge check the edge's predicted cost, its speculative rounds speculation's; a protocol
    that never chooses checks neither."""
    edge, ue = open_pair(pair, PROMPTS[1], protocol="auto", draft_len=4, max_new_tokens=40)
    alone = [r for r in play(edge, ue, POOR) if isinstance(r, EdgeRound)]
    assert alone and ue.window.spec_check.predicted_s == 0  # the first round had no choice to check
    assert ue.window.edge_check.predicted_s == pytest.approx(sum(
        _decayed([r.choice.edge_s_per_token / r.choice.edge_factor * len(r.tokens) for r in alone])))
    w = WindowTracker()  # a speculative round: its uncorrected prediction against its request-to-verdict time
    check_spec(w, HandOver(False, 16, 0.8 * 0.004, 0.005, spec_factor=0.8), t_round_s=0.03, tokens=9)
    assert w.spec_check == Ratio(0.03, pytest.approx(0.036)) and w.edge_check == Ratio()
    check_spec(w, None, t_round_s=0.03, tokens=9)  # a round no choice preceded (the first) checks nothing
    assert w.spec_check == Ratio(0.03, pytest.approx(0.036))
    w.edge_tokens_since_spec = 40
    check_spec(w, HandOver(False, 16, 0.004, 0.005), t_round_s=0.05, tokens=2, prefilled=True)
    assert w.spec_check == Ratio(0.03, pytest.approx(0.036))  # a prompt's first block: its prefill priced apart
    assert w.edge_tokens_since_spec == 0  # but it was speculation
    _, greedy = open_pair(pair, PROMPTS[1], protocol="greedy", draft_len=4, max_new_tokens=40)
    assert greedy.window.spec_check.predicted_s == 0 and greedy.window.edge_check.predicted_s == 0


def _decayed(xs: list[float], decay: float = 0.8) -> list[float]:
    """Each term's weight after the later ones' decay (wisv/timing/check.py CHECK_DECAY)."""
    return [x * decay ** (len(xs) - 1 - i) for i, x in enumerate(xs)]


def test_auto_chooses_after_a_first_block_whose_prefill_the_drafter_timed(pair) -> None:
    """A prompt's first block pays the drafter's prefill of the prompt; the drafter times that read apart, so the
    block's other tokens are clean drafting and auto chooses from the second round; the edge's run of tokens alone
    is counted from the last speculative round."""
    edge, ue = open_pair(pair, PROMPTS[1], protocol="auto", draft_len=4, max_new_tokens=40)
    link, rounds = Loopback(edge), []
    while not ue.done:
        rounds.append(ue.play_round(POOR, link))
        if len(rounds) == 1:
            assert rounds[0].prefilled and rounds[0].t_prefill_s > 0 and not ue.window.tau_from_prefill
    assert isinstance(rounds[1], EdgeRound) or rounds[1].choice is not None  # chosen, not speculated by default
    assert any(isinstance(r, EdgeRound) for r in rounds[1:])
    last_spec = max(i for i, r in enumerate(rounds) if not isinstance(r, EdgeRound))
    assert ue.window.edge_tokens_since_spec == sum(len(r.tokens) for r in rounds[last_spec + 1:])
    assert ue.window.edge_running == isinstance(rounds[-1], EdgeRound)  # the next prompt's choice starts from it
