"""`auto` hands rounds to the edge (protocols/ue_handover.py, EdgeSession.on_generate): the UE and edge sessions
in-process, every message through the wire format; the output stays the target's greedy output."""
from __future__ import annotations

import pytest

from channel.csi import CSI
from protocols.edge_side import EdgeSession
from protocols.errors import ProtocolError
from protocols.stream import decode_turn
from protocols.ue_handover import EdgeRound, check_spec, run_part
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
        if msg.type == MsgType.GENERATE:  # a handed-over run: its parts, from the edge's stream turns
            self.edge.on_generate(msg)
            self.out += drain(self.edge)
            return
        handler = {MsgType.DRAFT: self.edge.on_draft, MsgType.HIDDEN: self.edge.on_hidden}[msg.type]
        self.out.append(wire(handler(msg)))

    def expect(self, msg: Message) -> None:
        """A run's next part: asked for by the run's GENERATE, and queued already."""

    def reply_waiting(self) -> bool:
        return bool(self.out)

    def replies(self):
        while self.out:
            yield self.out.pop(0)


def drain(edge: EdgeSession) -> list[Message]:
    """The edge's stream turns until its run has nothing more to send: the CHUNKs, through the wire format."""
    out = []
    while edge.active:
        for _, m in decode_turn([edge], None, 1):
            if isinstance(m, Exception):
                raise m
            out.append(wire(m))
    return out


def play(edge: EdgeSession, ue: UESession, csi: CSI) -> list:
    link, rounds = Loopback(edge), []
    while not ue.done:
        rounds.append(ue.play_round(csi, link))
    return rounds


def test_a_run_comes_in_parts_no_larger_than_asked_and_stays_lossless(pair) -> None:
    """--run-part-tokens 2: every part of every handed-over run holds at most 2 tokens (the user's first token comes
    with the first of them); without it a run's parts are larger; the output is the target's either way."""
    assert run_part(31, 1) == 1 and run_part(31, None) == 31 and run_part(None, 4) == 4 and run_part(None, None) is None
    sizes = {}
    for asked in (2, None):
        edge, ue = open_pair(pair, PROMPTS[1], protocol="auto", draft_len=4, max_new_tokens=40, run_part_tokens=asked)
        rounds = play(edge, ue, POOR)
        assert ue.tokens == reference(pair, PROMPTS[1]).tokens
        sizes[asked] = [len(r.tokens) for r in rounds if isinstance(r, EdgeRound)]
    assert sizes[2] and max(sizes[2]) <= 2 and max(sizes[None]) > 2


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
    assert edge.on_generate(ask) is None and edge.streaming  # the run starts; its parts follow from the turns
    edge.on_generate(ask)  # a resend naming the part being decoded: nothing changes
    [first] = drain(edge)
    assert edge.next_round == 1 and not edge.streaming
    edge.on_generate(ask)  # a resend naming the part sent: the same CHUNK again, nothing decoded
    [again] = drain(edge)
    assert again.header == first.header and again.tensors["tokens"].tolist() == first.tensors["tokens"].tolist()
    assert edge.generated == 5
    assert first.tensors["tokens"].tolist() == reference(pair, PROMPTS[1]).tokens[:5]
    with pytest.raises(ProtocolError, match="without tokens"):
        edge.on_generate(wire(make(MsgType.GENERATE, ue.sid, None, round=1, **ue.token)))
    with pytest.raises(ProtocolError, match="expected round 1"):
        edge.on_generate(wire(make(MsgType.GENERATE, ue.sid, None, round=3, tokens=5, **ue.token)))


def test_the_edge_sends_a_run_in_parts_each_a_round_and_resends_from_a_part(pair) -> None:
    """A GENERATE of 11 tokens in parts of 4: CHUNKs of rounds 0, 1, 2 holding 4, 4 and 3 of the target's tokens;
    a GENERATE naming part 1 resends parts 1 and 2; a DRAFT while the run decodes is refused, and one after it is
    the next round."""
    edge, ue = open_pair(pair, PROMPTS[1], protocol="auto", draft_len=4, max_new_tokens=40)
    edge.on_generate(wire(make(MsgType.GENERATE, ue.sid, None, round=0, tokens=11, every_tokens=4, **ue.token)))
    assert decode_turn([edge], None, 1) == []  # one step: the first part is not due yet
    with pytest.raises(ProtocolError, match="edge generates the round"):
        edge.on_draft(wire(ue.next_draft(None)))
    parts = drain(edge)
    assert [p.header["round"] for p in parts] == [0, 1, 2]
    assert [len(p.tensors["tokens"]) for p in parts] == [4, 4, 3]
    ref = reference(pair, PROMPTS[1]).tokens
    assert [t for p in parts for t in p.tensors["tokens"].tolist()] == ref[:11]
    assert not any(p.header["done"] for p in parts) and edge.next_round == 3 and edge.rounds == 3
    edge.on_generate(wire(make(MsgType.GENERATE, ue.sid, None, round=1, tokens=7, every_tokens=4, **ue.token)))
    assert [p.header["round"] for p in drain(edge)] == [1, 2] and edge.generated == 11  # resent, not decoded


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


def test_a_run_comes_in_parts_that_each_arrive_within_the_reply_timeout(pair) -> None:
    """With a reply timeout of 40 ms the UE asks for parts the edge is predicted to decode within a quarter of it;
    each part is a round of its own, the run's tokens are the target's, and the edge's cost is checked once a run
    (its time, GENERATE to the last part), not once a part."""
    from wisv.timing.handover import max_chunk_tokens
    edge, ue = open_pair(pair, PROMPTS[1], protocol="auto", draft_len=4, max_new_tokens=40, reply_timeout_s=0.04)
    link, rounds, asked = Loopback(edge), [], []
    while not ue.done:
        if ue.run is not None:
            asked.append(ue.run.part_tokens)
        rounds.append(ue.play_round(POOR, link))
    assert ue.tokens == reference(pair, PROMPTS[1]).tokens
    runs: dict[int, list[EdgeRound]] = {}
    for r in rounds:
        if isinstance(r, EdgeRound):
            runs.setdefault(id(r.choice), []).append(r)
    assert any(len(parts) > 1 for parts in runs.values())  # a run came in parts, each a round
    assert [r.index for r in rounds] == list(range(len(rounds)))
    assert all(a is not None and a <= max_chunk_tokens(ue.window.edge_decode_s, 0.04) * 2 for a in asked)
    assert all(len(p.tokens) <= max(asked) for parts in runs.values() for p in parts)
    runs_tokens = [(parts[0].choice, sum(len(p.tokens) for p in parts)) for parts in runs.values()]
    assert ue.window.edge_check.predicted_s == pytest.approx(sum(
        _decayed([c.edge_s_per_token / c.edge_factor * n for c, n in runs_tokens])))
    assert edge.generated == len(ue.tokens) and edge.rounds == len(rounds)


def test_auto_with_prompt_lookup_hands_over_and_stays_lossless(pair) -> None:
    """Prompt lookup as auto's drafter: on a poor link the edge takes rounds, the UE's lookup follows its runs
    (``agreement``), and the output is the target's.  (Prompt lookup's session had no ``agreement``: auto failed at
    its first hand-over.)"""
    from protocols.registry import servable
    from protocols.ue_side import UEParams
    from tests.protocols.test_sessions import EOS
    from wisv.decoding.ngram import NgramConfig, NgramDraftSession
    from wisv.decoding.sessions import VerifySession
    from wisv.head.policy import RejectAll
    _, target = pair
    prompt = PROMPTS[1] * 2  # a prompt that repeats itself: the lookup matches in places
    params = UEParams(protocol="auto", draft_len=4, max_new_tokens=40)
    ue = UESession("ue-0", NgramDraftSession(prompt, NgramConfig(1, 3, 4)), params, EOS)
    edge = EdgeSession("ue-0", VerifySession(target, prompt), wire(ue.open_message()), RejectAll(), 0.5, EOS)
    ue.servable = servable(False)  # as OPEN_OK from an edge whose head reads no drafter hidden states says
    rounds = play(edge, ue, POOR)
    handed = [r for r in rounds if isinstance(r, EdgeRound)]
    assert handed and ue.tokens == reference(pair, prompt).tokens
    assert ue.d.seq[len(prompt):] + ue.unfollowed == ue.tokens  # the lookup followed every run but the last
    ue.follow_last()  # ... which it follows after the prompt's last token, as the live UE does
    assert not ue.unfollowed and ue.d.seq[len(prompt):] == ue.tokens
