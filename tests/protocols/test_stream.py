"""Generation without speculation (protocols/stream.py, protocols/ue_stream.py): the chunk rule, server-only on an
in-process edge (the target's greedy output, chunked as asked, batched across sessions, resent exactly once, its
messages refused where they do not belong), and on-device (the drafter's greedy output, no edge)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from protocols.chunks import ChunkRule, chunk_due
from protocols.schema import OpenOk
from protocols.stream import EdgeStream
from protocols.ue_side import UEParams, UESession
from protocols.ue_stream import DeviceStream, ServerStream, ue_session
from protocols.wire import Limits, MsgType, WireError, decode, encode, make
from testbed.live.edge.edgeserver import EdgeServer
from testbed.live.edge.serveconfig import ServeConfig
from tests.tiny_pair import make_pair
from wisv.decoding.sessions import DraftSession
from wisv.decoding.speculative import RejectAll, target_greedy

VOCAB, EOS, MAX_NEW = 61, 60, 30
LIMITS = Limits(vocab_size=VOCAB, max_draft_len=16, max_positions=16)
PROMPTS = [[3, 4, 5], [7, 8, 9, 10], [20]]


@pytest.fixture(scope="module")
def pair():
    torch.set_num_threads(1)
    return make_pair("llama", 32, 2, 4, 2, vocab=VOCAB, eos=EOS)


@pytest.mark.parametrize("rule, tokens, elapsed_s, due", [
    (ChunkRule(), 0, 9.0, False),  # never an empty chunk
    (ChunkRule(), 1, 0.0, True),  # by default every token is a chunk
    (ChunkRule(every_tokens=4), 3, 9.0, False), (ChunkRule(every_tokens=4), 4, 0.0, True),
    (ChunkRule(every_ms=10.0), 5, 0.0099, False), (ChunkRule(every_ms=10.0), 1, 0.010, True),
    (ChunkRule(every_tokens=4, every_ms=10.0), 4, 0.0, True),  # whichever comes first
    (ChunkRule(every_tokens=4, every_ms=10.0), 2, 0.011, True),
    (ChunkRule(every_tokens=4, every_ms=10.0), 2, 0.005, False),
])
def test_the_chunk_rule(rule: ChunkRule, tokens: int, elapsed_s: float, due: bool) -> None:
    assert chunk_due(rule, tokens, elapsed_s) is due


@pytest.mark.parametrize("bad", [dict(every_tokens=0), dict(every_ms=0.0), dict(every_ms=-1.0),
                                 dict(every_ms=math.inf), dict(every_ms=math.nan)])
def test_a_bad_chunk_rule_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError, match="every_"):
        ChunkRule(**bad)


def test_the_rule_travels_in_generate_as_given() -> None:
    for rule in (ChunkRule(), ChunkRule(every_tokens=3), ChunkRule(every_ms=2.5), ChunkRule(4, 7.0)):
        msg = decode(encode(make(MsgType.GENERATE, "s", None, round=0, **rule.header())), LIMITS)
        assert ChunkRule.of(msg.header) == rule and set(rule.header()) <= {"every_tokens", "every_ms"}
    for bad in ({"every_ms": 0.0}, {"every_ms": -2.0}, {"every_tokens": 0}):
        with pytest.raises(WireError, match="every_"):
            decode(encode(make(MsgType.GENERATE, "s", None, round=0, **bad)), LIMITS)


def _ues(pair, protocol: str = "server", **params) -> dict[bytes, UESession]:
    return {f"p{i}".encode(): ue_session(f"s{i}", DraftSession(pair[0], p), UEParams(
        protocol=protocol, max_new_tokens=MAX_NEW, **params), EOS) for i, p in enumerate(PROMPTS)}


def _open(server: EdgeServer, ues: dict[bytes, UESession]) -> None:
    for peer, ue in ues.items():
        reply = decode(server.handle(peer, encode(ue.open_message())), LIMITS)
        assert reply.type == MsgType.OPEN_OK, reply.header
        ue.check_open_ok(OpenOk.of(reply.header))


def _generate(ue: UESession, round_: int | None = None) -> list[bytes]:
    """The UE's GENERATE from chunk ``round_`` (default: its next)."""
    rule = ue.rule.header() if isinstance(ue, ServerStream) else {}
    return encode(make(MsgType.GENERATE, ue.sid, None, round=ue.n_rounds if round_ is None else round_, **rule,
                       **ue.token))


def stream(server: EdgeServer, ues: dict[bytes, UESession]) -> list[tuple[bytes, dict]]:
    """OPEN every UE, send each one GENERATE, then turn the edge until no stream is left; every chunk the UEs got."""
    _open(server, ues)
    out, got = server.handle_many([(peer, _generate(ue)) for peer, ue in ues.items()]), []
    while out or server.streams:
        for peer, frames in out:
            msg = decode(frames, LIMITS)
            assert msg.type == MsgType.CHUNK, msg.header
            ues[peer].on_reply(msg)
            got.append((peer, msg.header | {"n": len(msg.tensors["tokens"])}))
        out = server.handle_many([])
    return got


@pytest.mark.parametrize("cfg", [{}, {"batch_verify": True}, {"batch_verify": True, "max_batch": 2}],
                         ids=["alone", "batched", "batch2"])
def test_server_only_is_the_targets_greedy_output_in_chunks(pair, cfg: dict) -> None:
    server = EdgeServer(ServeConfig(max_draft_len=16, **cfg), pair[1], RejectAll())
    sizes = []
    if server.engine is not None:
        verify = server.engine.verify
        server.engine.verify = lambda reqs: sizes.append(len(reqs)) or verify(reqs)
    ues = _ues(pair, stream_every_tokens=4)
    chunks = stream(server, ues)
    for ue, prompt in zip(ues.values(), PROMPTS):
        assert isinstance(ue, ServerStream) and ue.done
        assert ue.tokens == target_greedy(pair[1], prompt, max_new_tokens=MAX_NEW, eos_token_id=EOS)
        mine = [h for p, h in chunks if p == f"p{PROMPTS.index(prompt)}".encode()]
        assert [h["round"] for h in mine] == list(range(len(mine))) == list(range(ue.n_rounds))
        assert all(h["n"] == 4 for h in mine[:-1]) and 1 <= mine[-1]["n"] <= 4 and mine[-1]["done"]
    if cfg:  # decode steps of the sessions streaming together share a pass, never past max_batch
        assert max(sizes) == min(3, cfg.get("max_batch", 16)) and max(h["batch"] for _, h in chunks) > 1


def test_a_generate_naming_an_earlier_chunk_gets_it_again_and_the_stream_goes_on(pair) -> None:
    server = EdgeServer(ServeConfig(max_draft_len=16), pair[1], RejectAll())
    ues = dict(list(_ues(pair, stream_every_tokens=3).items())[:1])
    [(peer, ue)] = ues.items()
    _open(server, ues)
    first = [decode(f, LIMITS) for _, f in server.handle_many([(peer, _generate(ue))])]
    while len(first) < 3:
        first += [decode(f, LIMITS) for _, f in server.handle_many([])]
    again = [decode(f, LIMITS) for _, f in server.handle_many([(peer, _generate(ue, 1))])]
    assert [m.header["round"] for m in again[:2]] == [1, 2]  # the chunks sent since chunk 1, again
    assert [encode(m) for m in again[:2]] == [encode(m) for m in first[1:3]]  # the same bytes: nothing decoded twice
    assert [m.header["round"] for m in again[2:]] in ([], [3])  # then the stream goes on
    bad = decode(server.handle(peer, _generate(ue, 9)), LIMITS)
    assert bad.type == MsgType.ERROR and bad.header["code"] == "bad_round"


def test_each_session_takes_only_its_own_messages(pair) -> None:
    server = EdgeServer(ServeConfig(max_draft_len=16), pair[1], RejectAll())
    ues = _ues(pair)
    drafting = UESession("g0", DraftSession(pair[0], [3, 4]), UEParams(protocol="greedy", draft_len=4), EOS)
    _open(server, ues | {b"g": drafting})
    stream_ue = ues[b"p0"]
    draft = make(MsgType.DRAFT, "s0", {"tokens": np.array([1, 2], np.int32)}, round=0, t_draft_s=0.0,
                 **stream_ue.token)
    for peer, frames in ((b"p0", encode(draft)), (b"g", _generate(drafting))):
        reply = decode(server.handle(peer, frames), LIMITS)
        assert reply.type == MsgType.ERROR and reply.header["code"] == "bad_type", reply.header
    device = ue_session("d0", DraftSession(pair[0], [3, 4]), UEParams(protocol="device"), EOS)
    refused = decode(server.handle(b"d", encode(device.open_message())), LIMITS)
    assert refused.type == MsgType.ERROR and refused.header["code"] == "unsupported"
    assert isinstance(server.sessions[stream_ue.token["token"]], EdgeStream)


@pytest.mark.parametrize("rule", [dict(), dict(stream_every_tokens=5), dict(stream_every_ms=1e-3)])
def test_on_device_is_the_drafters_greedy_output_in_chunks(pair, rule: dict) -> None:
    for prompt in PROMPTS:
        ue = ue_session("d", DraftSession(pair[0], prompt), UEParams(protocol="device", max_new_tokens=MAX_NEW,
                                                                      **rule), EOS)
        assert isinstance(ue, DeviceStream)
        chunks = []
        while not ue.done:
            chunks.append(ue.play_round(None))
        assert ue.tokens == target_greedy(pair[0], prompt, max_new_tokens=MAX_NEW, eos_token_id=EOS)
        assert [c.index for c in chunks] == list(range(len(chunks))) and sum(len(c.tokens) for c in chunks) == \
            len(ue.tokens)
        sizes = [len(c.tokens) for c in chunks[:-1]]
        assert all(n == rule.get("stream_every_tokens", 1) for n in sizes) if "stream_every_ms" not in rule \
            else all(n >= 1 for n in sizes)
        assert all(c.t_gen_s > 0 and c.t_decode_s is None for c in chunks)


def test_a_stream_resumes_on_a_new_edge_from_the_committed_prefix(pair) -> None:
    """The edge lost the session (a restart) after two chunks: the UE re-OPENs with its committed prefix and asks from
    its next chunk; the output is still the target's greedy output, each chunk once."""
    ues = dict(list(_ues(pair, stream_every_tokens=4).items())[:1])
    [(peer, ue)] = ues.items()
    first = EdgeServer(ServeConfig(max_draft_len=16), pair[1], RejectAll())
    _open(first, ues)
    out = first.handle_many([(peer, _generate(ue))])
    while ue.n_rounds < 2:
        for _, frames in out:
            ue.on_reply(decode(frames, LIMITS))
        out = first.handle_many([])
    restarted = EdgeServer(ServeConfig(max_draft_len=16), pair[1], RejectAll())
    resumed = decode(encode(ue.open_message()), LIMITS)
    assert resumed.header["round"] == 2 and list(resumed.tensors["prompt"]) == PROMPTS[0] + ue.tokens
    stale = decode(restarted.handle(peer, _generate(ue, 2)), LIMITS)  # the old token: no such session here
    assert stale.type == MsgType.ERROR and stale.header["code"] == "unknown_session"
    rounds = [h["round"] for _, h in stream(restarted, ues)]  # OPEN again, GENERATE from chunk 2
    assert rounds == list(range(2, ue.n_rounds)) and ue.done
    assert ue.tokens == target_greedy(pair[1], PROMPTS[0], max_new_tokens=MAX_NEW, eos_token_id=EOS)
