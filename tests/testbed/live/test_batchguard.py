"""One failing session in a batch fails alone, internal errors reach the peer without internals, and the KV budget
is enforced before allocating, with and without the batching engine (testbed/live/edge/serve.py, edgebatch.py)."""
import logging

import numpy as np
import pytest
import torch

from protocols.ue_side import UEParams, UESession
from protocols.wire import Limits, MsgType, decode, encode, make
from testbed.live.edge.edgeserver import INTERNAL_TEXT, EdgeServer
from testbed.live.edge.serveconfig import ServeConfig
from tests.edge_helpers import open_on, token_of
from tests.tiny_pair import make_pair
from wisv.decoding.sessions import DraftSession
from wisv.decoding.speculative import RejectAll, speculative_generate
from wisv.serving.kvbudget import MB, KVShape, session_tokens

VOCAB, EOS, K, MAX_NEW = 61, 60, 4, 12
LIMITS = Limits(vocab_size=VOCAB, max_draft_len=16, max_positions=16)
PROMPTS = [[3, 4, 5], [7, 8, 9, 10, 11, 12], [20], [30, 31, 32, 33]]


@pytest.fixture(scope="module")
def pair():
    torch.set_num_threads(1)
    return make_pair("llama", 32, 2, 4, 2, vocab=VOCAB, eos=EOS)


def _server(pair, **cfg) -> EdgeServer:
    return EdgeServer(ServeConfig(max_draft_len=16, **cfg), pair[1], RejectAll())


def _ues(pair) -> dict[bytes, UESession]:
    params = UEParams(protocol="greedy", draft_len=K, max_new_tokens=MAX_NEW)
    return {f"peer{i}".encode(): UESession(f"s{i}", DraftSession(pair[0], p), params, EOS)
            for i, p in enumerate(PROMPTS)}


def _open(server: EdgeServer, ues: dict[bytes, UESession]) -> None:
    for peer, ue in ues.items():
        assert open_on(server, peer, ue, LIMITS).type == MsgType.OPEN_OK


def _run_poisoned(server: EdgeServer, ues: dict[bytes, UESession], poisoned: bytes) -> dict[bytes, list]:
    """Lockstep rounds until every healthy UE is done; the replies each peer got, decoded."""
    got: dict[bytes, list] = {p: [] for p in ues}
    outbox = {peer: ue.next_draft(None) for peer, ue in ues.items()}
    while outbox:
        replies = server.handle_many([(peer, encode(m)) for peer, m in outbox.items()])
        assert sorted(p for p, _ in replies) == sorted(outbox)  # every DRAFT answered, the poisoned one too
        outbox = {}
        for peer, frames in replies:
            reply = decode(frames, LIMITS)
            got[peer].append(reply)
            if peer == poisoned:
                continue
            assert reply.type == MsgType.VERDICT, reply.header
            nxt = ues[peer].on_reply(reply)
            if not ues[peer].done:
                outbox[peer] = nxt or ues[peer].next_draft(None)
    return got


def _check_healthy(pair, ues: dict[bytes, UESession], poisoned: bytes) -> None:
    for (peer, ue), prompt in zip(ues.items(), PROMPTS):
        if peer != poisoned:
            ref = speculative_generate(pair[0], pair[1], prompt, max_new_tokens=MAX_NEW, draft_len=K, eos_token_id=EOS)
            assert ue.done and ue.tokens == ref.tokens


def test_an_internal_error_in_a_batch_fails_that_session_alone(pair, caplog):
    server = _server(pair, batch_verify=True)
    ues = _ues(pair)
    _open(server, ues)
    poisoned = b"peer1"
    verify, sizes, bad = server.engine.verify, [], ues[b"peer1"].token["token"]  # the engine names it by its token

    def flaky(reqs):  # the target fails on any pass holding the poisoned session
        sizes.append(len(reqs))
        if any(r.sid == bad for r in reqs):
            raise RuntimeError("secret internals")
        return verify(reqs)

    server.engine.verify = flaky
    with caplog.at_level(logging.ERROR, logger="testbed.serve"):
        got = _run_poisoned(server, ues, poisoned)
    err = got[poisoned][0]
    assert (err.type, err.header["code"], err.header["text"]) == (MsgType.ERROR, "internal", INTERNAL_TEXT)
    assert "secret" not in err.header["text"]  # the peer learns nothing of the edge's internals ...
    assert "secret internals" in caplog.text and "Traceback" in caplog.text  # ... the edge's log has it all
    assert bad not in server.sessions  # the failed session is closed; the others were served
    assert sizes[:5] == [4, 1, 1, 1, 1]  # the failed batch of 4, then each of its requests alone
    _check_healthy(pair, ues, poisoned)


def test_a_session_whose_scheduling_view_fails_fails_alone(pair, monkeypatch):
    server = _server(pair, batch_verify=True)
    ues = _ues(pair)
    _open(server, ues)
    poisoned, request = b"peer2", server.batcher.request

    def view(peer, sess):
        if peer == poisoned:
            raise ZeroDivisionError("bad view")
        return request(peer, sess)

    monkeypatch.setattr(server.batcher, "request", view)
    got = _run_poisoned(server, ues, poisoned)
    assert got[poisoned][0].header["code"] == "internal"
    _check_healthy(pair, ues, poisoned)


def test_a_failing_batcher_fails_its_held_drafts_and_the_edge_goes_on(pair, monkeypatch):
    server = _server(pair, batch_verify=True)
    ues = _ues(pair)
    _open(server, ues)
    monkeypatch.setattr(server.batcher, "step", lambda queue: 1 / 0)
    replies = server.handle_many([(p, encode(ue.next_draft(None))) for p, ue in ues.items()])
    assert sorted(decode(r, LIMITS).header["code"] for _, r in replies) == ["internal"] * 4
    assert server.held == [] and server.sessions == {}
    ping = make(MsgType.PING, "x", None, seq=1, t_send=0.0)
    assert decode(server.handle(b"p", encode(ping)), LIMITS).type == MsgType.PONG


def test_a_batch_too_large_for_the_budget_is_verified_one_by_one(pair):
    shape = KVShape.of(pair[1])
    alone = shape.bytes_for(session_tokens(max(map(len, PROMPTS)), MAX_NEW, K))
    server = _server(pair, batch_verify=True, memory_budget_mb=1.2 * alone / MB)  # one session's cache, not two
    ues = _ues(pair)
    _open(server, ues)
    got = _run_poisoned(server, ues, b"none")
    assert {m.header["batch"] for ms in got.values() for m in ms} == {1}  # retried alone, never refused
    assert server.engine.memory_bytes() <= server.cfg.memory_budget_mb * MB
    _check_healthy(pair, ues, b"none")


def _open_msg(sid: str, prompt_len: int, max_new: int):
    return make(MsgType.OPEN, sid, {"prompt": np.arange(1, prompt_len + 1, dtype=np.int32)}, protocol="greedy",
                draft_len=K, max_new_tokens=max_new)


@pytest.mark.parametrize("batch_verify", [False, True], ids=["sessions", "engine"])
def test_open_beyond_the_kv_budget_is_refused_before_allocating(pair, batch_verify):
    shape = KVShape.of(pair[1])
    one = shape.bytes_for(session_tokens(8, 40, K))
    server = _server(pair, batch_verify=batch_verify, memory_budget_mb=1.5 * one / MB)
    err = decode(server.handle(b"p", encode(_open_msg("big", 8, 200))), LIMITS)
    assert err.type == MsgType.ERROR and err.header["code"] == "kv_budget", err.header
    assert "'big'" in err.header["text"] and "--memory-budget-mb" in err.header["text"]
    assert server.sessions == {}
    ref = make(MsgType.REFERENCE, "r", {"prompt": np.arange(1, 9, dtype=np.int32)}, max_new_tokens=200)
    assert decode(server.handle(b"p", encode(ref)), LIMITS).header["code"] == "kv_budget"
    assert decode(server.handle(b"p", encode(_open_msg("a", 8, 40))), LIMITS).type == MsgType.OPEN_OK
    second = decode(server.handle(b"q", encode(_open_msg("b", 8, 40))), LIMITS)
    if batch_verify:  # the engine makes room per pass: each session must only fit alone
        assert second.type == MsgType.OPEN_OK
        return
    assert second.header["code"] == "kv_budget"  # beside a's reservation it does not fit
    reply = server.handle(b"p", encode(make(MsgType.CLOSE, "a", **token_of(server, "a"))))
    assert decode(reply, LIMITS).type == MsgType.CLOSED
    assert decode(server.handle(b"q", encode(_open_msg("b", 8, 40))), LIMITS).type == MsgType.OPEN_OK
    assert server.kv.total == one
