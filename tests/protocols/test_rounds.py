"""Exactly-once rounds, message by message (no sockets): a retransmitted DRAFT or HIDDEN gets its round's cached reply
and commits nothing twice, another round is refused naming both rounds, the UE drops stale replies, and a session
resumed on a fresh edge with the committed prefix ends with the uninterrupted output."""
from __future__ import annotations

import pytest

from protocols.edge_side import EdgeSession, ProtocolError, round_action
from protocols.ue_side import UESession, is_current
from protocols.wire import MsgType, encode, error_message, make
from tests.protocols.test_sessions import PROMPTS, open_pair, pair, reference, wire  # noqa: F401 (fixture)
from wisv.decoding.sessions import VerifySession
from wisv.decoding.speculative import RejectAll

CASES = {  # name -> UEParams of a session over every round protocol and the SpecEdge paths
    "greedy": {"protocol": "greedy"}, "fh": {"protocol": "fh"}, "sh": {"protocol": "sh"},
    "reject": {"protocol": "reject", "seed": 3}, "tree": {"protocol": "tree", "tree_budget": 6},
    "tree-proactive": {"protocol": "tree", "tree_budget": 6, "proactive": 3},
    "greedy-proactive": {"protocol": "greedy", "proactive": 3},
}


def test_round_action_new_replay_and_bad_round() -> None:
    assert round_action(0, 0, None) == "new"
    assert round_action(4, 5, 4) == "replay" and round_action(5, 5, 4) == "new"
    for got in (3, 6, 0):
        with pytest.raises(ProtocolError) as e:
            round_action(got, 5, 4)
        assert e.value.code == "bad_round"
        assert f"DRAFT for round {got}: expected round 5, or round 4 again" == str(e.value)
    with pytest.raises(ProtocolError, match="DRAFT for round 1: expected round 0$"):
        round_action(1, 0, None)


def state(edge: EdgeSession) -> tuple:
    """What a round changes on the edge."""
    return edge.generated, edge.rounds, edge.next_round, list(edge.verify.seq), edge.verify.cached_len, edge.done


def answer(edge: EdgeSession, msg) -> list[bytes]:
    """The edge's encoded reply (HIDDEN_REQ answered by the caller)."""
    out = edge.on_draft(msg) if msg.type == MsgType.DRAFT else edge.on_hidden(msg)
    return [bytes(f) for f in encode(out)]


@pytest.mark.parametrize("case", list(CASES))
def test_a_retransmitted_round_gets_the_same_reply_and_commits_nothing_twice(pair, case: str) -> None:
    edge, ue = open_pair(pair, PROMPTS[1], **CASES[case])
    while not ue.done:
        draft = wire(ue.next_draft(None))
        ue.draft_proactively(lambda: False)
        first = answer(edge, draft)
        after = state(edge)
        assert answer(edge, draft) == first and state(edge) == after  # the cached reply, nothing verified again
        reply = wire(edge.on_draft(draft))
        while (nxt := ue.on_reply(reply)) is not None:  # SH: HIDDEN_REQ, then HIDDEN
            hidden = wire(nxt)
            verdict = answer(edge, hidden)
            after = state(edge)
            assert answer(edge, hidden) == verdict and answer(edge, draft) == verdict and state(edge) == after
            reply = wire(edge.on_hidden(hidden))
    assert edge.done and edge.generated == len(ue.tokens)
    if case != "reject":  # lossless: a replay changed nothing in the output
        assert ue.tokens == reference(pair, PROMPTS[1]).tokens


def test_a_draft_for_another_round_is_refused_naming_both_and_changes_nothing(pair) -> None:
    edge, ue = open_pair(pair, PROMPTS[0], protocol="greedy")
    for _ in range(2):
        assert ue.on_reply(wire(edge.on_draft(wire(ue.next_draft(None))))) is None
    draft = wire(ue.next_draft(None))  # round 2
    before = state(edge)
    for got in (0, 3, 9):
        bad = make(MsgType.DRAFT, ue.sid, dict(draft.tensors), **(draft.header | {"round": got}))
        with pytest.raises(ProtocolError) as e:
            edge.on_draft(wire(bad))
        assert e.value.code == "bad_round" and f"round {got}: expected round 2, or round 1 again" in str(e.value)
        assert state(edge) == before
    assert ue.on_reply(wire(edge.on_draft(draft))) is None and edge.next_round == 3


def test_sh_draft_resent_while_hidden_is_awaited_gets_the_same_request(pair) -> None:
    edge, ue = open_pair(pair, PROMPTS[1], protocol="sh")
    while not ue.done:
        draft = wire(ue.next_draft(None))
        reply = edge.on_draft(draft)
        if reply.type == MsgType.HIDDEN_REQ:
            assert edge.on_draft(draft) is reply and edge.pending is not None
            break
        ue.on_reply(wire(reply))
    else:
        pytest.fail("no round asked for hidden states")


def test_the_ue_drops_replies_of_other_sessions_and_rounds() -> None:
    verdict = make(MsgType.VERDICT, "ue-0", None, round=3, n_accepted=0, next_token=1, mismatches=0, queried=0,
                   t_verify_s=0.0, t_head_s=0.0, done=False)
    assert is_current(verdict, "ue-0", 3) and is_current(verdict, "ue-0") and is_current(verdict, None, None)
    assert not is_current(verdict, "ue-0", 2) and not is_current(verdict, "ue-1", 3)
    assert is_current(error_message("ue-0", "bad_round", "x"), "ue-0", 3)
    assert is_current(error_message("", "bad_header", "x"), "ue-0", 3)  # the edge could not read the session
    assert not is_current(error_message("ue-1", "bad_round", "x"), "ue-0", 3)
    late = make(MsgType.OPEN_OK, "ue-0", None, target_hidden=8, vocab_size=61)  # to an OPEN sent twice
    assert not is_current(late, "ue-0", 0) and not is_current(late, "ue-0", want=MsgType.PONG)
    assert is_current(late, "ue-0", want=MsgType.OPEN_OK) and is_current(error_message("ue-0", "busy", "x"), "ue-0",
                                                                         want=MsgType.PONG)


def resume(pair, edge: EdgeSession, ue: UESession) -> EdgeSession:
    """A fresh edge session from the UE's OPEN after the edge lost the first (a restart)."""
    msg = wire(ue.open_message())
    assert msg.tensors["prompt"].tolist() == ue.d.seq and msg.header["round"] == ue.n_rounds
    assert msg.header["max_new_tokens"] == ue.p.max_new_tokens - len(ue.tokens)
    return EdgeSession(ue.sid, VerifySession(pair[1], ue.d.seq), msg, RejectAll(), 0.5, edge.eos)


@pytest.mark.parametrize("case", ["greedy", "sh", "tree-proactive", "greedy-proactive"])
@pytest.mark.parametrize("cut", [1, 3])
def test_a_session_resumed_mid_round_ends_with_the_uninterrupted_output(pair, case: str, cut: int) -> None:
    edge, ue = open_pair(pair, PROMPTS[1], **CASES[case])
    while not ue.done:
        draft = wire(ue.next_draft(None))
        ue.draft_proactively(lambda: False)
        if ue.n_rounds == cut:  # the edge restarts with this DRAFT in flight: re-OPEN, send it again
            edge = resume(pair, edge, ue)
        reply = wire(edge.on_draft(draft))
        while (nxt := ue.on_reply(reply)) is not None:
            reply = wire(edge.on_hidden(wire(nxt)))
    assert ue.n_rounds > cut and edge.done
    assert ue.tokens == reference(pair, PROMPTS[1]).tokens
