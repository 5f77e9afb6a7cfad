"""Fault test: a replayed DRAFT, through the edge server's message handling (direct and batching paths), gets the
very bytes of its first VERDICT and commits nothing twice; a DRAFT for another round is refused and changes nothing."""
from __future__ import annotations

import pytest

from protocols.wire import MsgType, decode, encode, make
from testbed.live.edge.edgeserver import EdgeServer
from testbed.live.edge.serveconfig import ServeConfig
from tests.edge_helpers import open_on, session_of
from tests.protocols.test_sessions import LIMITS, PROMPTS, open_pair, pair, reference  # noqa: F401 (fixture)
from wisv.decoding.speculative import RejectAll

PEER = b"peer-0"


def reply(server: EdgeServer, frames: list[bytes], batching: bool) -> list[bytes]:
    """The server's encoded reply to one message (the batching path verifies what it holds at once)."""
    if not batching:
        return [bytes(f) for f in server.handle(PEER, frames)]
    (peer, out), = server.handle_many([(PEER, frames)])
    assert peer == PEER
    return [bytes(f) for f in out]


def edge_state(server: EdgeServer, sid: str) -> tuple:
    s = session_of(server, sid)
    return s.generated, s.rounds, s.next_round, list(s.verify.seq), s.done


@pytest.mark.parametrize("batching", [False, True], ids=["direct", "batching"])
@pytest.mark.parametrize("protocol", ["greedy", "sh"])
def test_a_replayed_draft_gets_the_same_verdict_and_commits_nothing_twice(pair, batching: bool, protocol: str):
    server = EdgeServer(ServeConfig(max_draft_len=16, batch_verify=batching), pair[1], RejectAll())
    _, ue = open_pair(pair, PROMPTS[1], protocol=protocol)
    assert open_on(server, PEER, ue, LIMITS).type == MsgType.OPEN_OK
    replays = 0
    while not ue.done:
        draft = encode(ue.next_draft(None))
        first = reply(server, draft, batching)
        after = edge_state(server, ue.sid)
        for _ in range(2):  # the same DRAFT twice more: a retransmission, and a replay of it
            assert reply(server, draft, batching) == first and edge_state(server, ue.sid) == after
            replays += 1
        msg = decode(first, LIMITS)
        while (nxt := ue.on_reply(msg)) is not None:  # SH: answer HIDDEN_REQ, replay the HIDDEN too
            verdict = reply(server, encode(nxt), False)
            assert reply(server, encode(nxt), False) == verdict == reply(server, draft, batching)
            msg = decode(verdict, LIMITS)
    assert replays > 2 and session_of(server, ue.sid).generated == len(ue.tokens)
    assert ue.tokens == reference(pair, PROMPTS[1]).tokens  # nothing committed twice: the output is the same


def test_a_draft_for_a_round_not_next_gets_bad_round_and_changes_nothing(pair):
    server = EdgeServer(ServeConfig(max_draft_len=16), pair[1], RejectAll())
    _, ue = open_pair(pair, PROMPTS[0], protocol="greedy")
    open_on(server, PEER, ue, LIMITS)
    ue.on_reply(decode(server.handle(PEER, encode(ue.next_draft(None))), LIMITS))
    before = edge_state(server, ue.sid)
    draft = ue.next_draft(None)  # round 1
    bad = make(MsgType.DRAFT, ue.sid, dict(draft.tensors), **(draft.header | {"round": 5}))
    err = decode(server.handle(PEER, encode(bad)), LIMITS)
    assert (err.type, err.header["code"]) == (MsgType.ERROR, "bad_round")
    assert "DRAFT for round 5: expected round 1, or round 0 again" in err.header["text"]
    assert edge_state(server, ue.sid) == before
    assert decode(server.handle(PEER, encode(draft)), LIMITS).header["round"] == 1
