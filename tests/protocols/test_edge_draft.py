"""The edge's own drafts for server-only (protocols/edge_draft.py, protocols/stream.py): the output stays the target's
greedy output, the CHUNKs count the drafted and accepted tokens, the suffix index learns from finished sessions and
forgets dropped ones, and the wire checks the counts."""
from __future__ import annotations

import numpy as np
import pytest

from protocols.edge_draft import EdgeDraftConfig, EdgeDrafter
from protocols.ue_side import UEParams
from protocols.ue_stream import ue_session
from protocols.wire import MsgType, WireError, decode, encode, make
from testbed.live.edge.edgeserver import EdgeServer
from testbed.live.edge.serveconfig import ServeConfig
from tests.protocols.test_stream import EOS, LIMITS, PROMPTS, VOCAB, _open, pair, stream  # noqa: F401 (pair: fixture)
from wisv.decoding.sessions import DraftSession
from wisv.decoding.speculative import RejectAll, target_greedy

MAX_NEW = 40  # the tiny pair, its limits and prompts are test_stream's


def _ues(pair, prompts=PROMPTS, **params) -> dict:
    return {f"p{i}".encode(): ue_session(f"s{i}", DraftSession(pair[0], p), UEParams(
        protocol="server", max_new_tokens=MAX_NEW, **params), EOS) for i, p in enumerate(prompts)}


def _run(server: EdgeServer, ues: dict) -> list[dict]:
    return [h for _, h in stream(server, ues)]


@pytest.mark.parametrize("method", ["ngram", "suffix"])
@pytest.mark.parametrize("cfg", [{}, {"batch_verify": True, "max_batch": 2}], ids=["alone", "batched"])
def test_edge_drafts_keep_the_targets_greedy_output(pair, method: str, cfg: dict) -> None:
    server = EdgeServer(ServeConfig(max_draft_len=16, edge_draft=method, edge_draft_tokens=5, **cfg), pair[1],
                        RejectAll())
    refs = [target_greedy(pair[1], p, max_new_tokens=MAX_NEW, eos_token_id=EOS) for p in PROMPTS]
    for _lap in range(2):  # the second lap: the suffix index holds the first lap's outputs
        ues = _ues(pair)
        chunks = _run(server, ues)
        assert [ue.tokens for ue in ues.values()] == refs
        assert all(0 <= h["accepted"] <= h["drafted"] <= 5 for h in chunks) and sum(h["accepted"] for h in chunks) > 0
        assert all(h["n"] == h["accepted"] + 1 for h in chunks if not h["done"])  # a pass is a chunk: accepted + 1
        assert sum(h["n"] for h in chunks) == sum(map(len, refs))
        rows = [ue.chunk for ue in ues.values()]
        assert all(r.accepted <= r.drafted for r in rows)
    if method == "suffix":  # the same prompts again: the index proposes the outputs it saw
        assert sum(h["accepted"] for h in chunks) >= sum(map(len, refs)) // 2
        assert len(chunks) < sum(map(len, refs)) // 2


def test_without_edge_drafts_chunks_carry_no_counts_and_one_token_a_pass(pair) -> None:
    chunks = _run(EdgeServer(ServeConfig(max_draft_len=16), pair[1], RejectAll()), _ues(pair))
    assert all("drafted" not in h and "accepted" not in h and h["n"] == 1 for h in chunks)


def test_a_chunk_of_several_passes_sums_their_counts(pair) -> None:
    server = EdgeServer(ServeConfig(max_draft_len=16, edge_draft="suffix"), pair[1], RejectAll())
    _run(server, _ues(pair))
    ues = _ues(pair, stream_every_tokens=6)
    chunks = _run(server, ues)
    assert all(h["n"] >= 6 for h in chunks if not h["done"])  # a pass may pass the rule's count
    assert sum(h["accepted"] for h in chunks) > 0 and [u.tokens for u in ues.values()] == [
        target_greedy(pair[1], p, max_new_tokens=MAX_NEW, eos_token_id=EOS) for p in PROMPTS]


def test_the_index_keeps_finished_outputs_and_forgets_dropped_sessions(pair) -> None:
    server = EdgeServer(ServeConfig(max_draft_len=16, edge_draft="suffix"), pair[1], RejectAll())
    ues = _ues(pair, prompts=PROMPTS[:1])
    _run(server, ues)
    cache = server.drafter.cache
    [(kind, _)] = cache.seqs
    assert kind == "done" and cache.tokens(next(iter(cache.seqs))) == next(iter(ues.values())).tokens
    dropped = _ues(pair, prompts=PROMPTS[1:2])
    _open(server, dropped)
    assert sorted(k for k, _ in cache.seqs) == ["done", "live"]
    for token in list(server.sessions):
        server._drop(token)
    assert [k for k, _ in cache.seqs] == ["done"]


def test_the_edge_drafts_within_the_budget() -> None:
    d = EdgeDrafter(EdgeDraftConfig("ngram", max_tokens=4))
    assert d.propose("s", [1, 2, 3, 1, 2, 3, 1, 2], 9) == [3, 1, 2] and d.propose("s", [1, 2, 1, 2], 0) == []
    assert EdgeDrafter().propose("s", [1, 1, 1], 3) == []
    for bad in (dict(method="tree"), dict(max_tokens=0), dict(cache_mb=0.0)):
        with pytest.raises(ValueError):
            EdgeDraftConfig(**bad)


@pytest.mark.parametrize("counts, ok", [({}, True), ({"drafted": 3, "accepted": 3}, True),
                                        ({"drafted": 0, "accepted": 0}, True), ({"drafted": 2, "accepted": 3}, False),
                                        ({"drafted": 2}, False), ({"accepted": 0}, False),
                                        ({"drafted": -1, "accepted": 0}, False)])
def test_the_wire_checks_a_chunks_counts(counts: dict, ok: bool) -> None:
    msg = make(MsgType.CHUNK, "s", {"tokens": np.array([1, 2], np.int32)}, round=0, t_decode_s=0.0, t_edge_s=0.0,
               done=False, **counts)
    if ok:
        assert {k: decode(encode(msg), LIMITS).header[k] for k in counts} == counts
    else:
        with pytest.raises(WireError, match="drafted|accepted"):
            decode(encode(msg), LIMITS)
