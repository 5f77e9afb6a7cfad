"""The edge's own drafts (protocols/edge_draft.py) beside the UE's: a round `auto` hands to the edge verifies the
edge's drafts (several tokens a pass, the CHUNK counts them, the UE's record carries them); the edge extends a greedy
chain's draft with its own continuation, verified in the same pass (the VERDICT's edge tokens, checked on the wire);
the speculative sessions' prompts and outputs feed the edge's suffix index; the output stays the target's greedy
output."""
from __future__ import annotations

import numpy as np
import pytest

from protocols.edge_draft import EdgeDraftConfig, EdgeDrafter
from protocols.edge_side import EdgeSession
from protocols.typed import Verdict
from protocols.ue_handover import EdgeRound
from protocols.ue_side import UEParams, UESession
from protocols.wire import MsgType, WireError, decode, encode, make
from tests.protocols.test_handover_sessions import POOR, drain, play
from tests.protocols.test_sessions import EOS, LIMITS, MAX_NEW, PROMPTS, pair, wire  # noqa: F401 (fixture)
from wisv.decoding.sessions import DraftSession, VerifySession
from wisv.decoding.speculative import RejectAll, target_greedy


def _open(pair, prompt: list[int], drafter: EdgeDrafter | None, **params) -> tuple[EdgeSession, UESession]:
    ue = UESession("ue-0", DraftSession(pair[0], prompt), UEParams(**{"draft_len": 4, "max_new_tokens": MAX_NEW}
                                                                   | params), EOS)
    edge = EdgeSession("ue-0", VerifySession(pair[1], prompt), wire(ue.open_message()), RejectAll(), 0.5, EOS, drafter)
    return edge, ue


@pytest.mark.parametrize("method", ["ngram", "suffix"])
def test_auto_hands_rounds_to_an_edge_that_drafts_and_stays_lossless(pair, method: str) -> None:
    drafter = EdgeDrafter(EdgeDraftConfig(method, max_tokens=5))
    accepted = []
    for _lap in range(2):  # the second lap: the suffix index holds the first lap's outputs
        got = []
        for prompt in PROMPTS:
            edge, ue = _open(pair, prompt, drafter, protocol="auto")
            rounds = play(edge, ue, POOR)
            assert ue.tokens == target_greedy(pair[1], prompt, max_new_tokens=MAX_NEW, eos_token_id=EOS)
            assert ue.d.seq[len(prompt):] + ue.unfollowed == ue.tokens  # the drafter followed every chunk but
            #   the last (follow_chunk: a prompt's last chunk costs no pass)
            got += [r for r in rounds if isinstance(r, EdgeRound)]
        assert got and all(0 <= r.accepted <= r.drafted for r in got)
        assert all(len(r.tokens) >= r.accepted + 1 for r in got)  # at least one target token a pass
        accepted.append(sum(r.accepted for r in got))
    if method == "suffix":
        assert accepted[1] > accepted[0] and accepted[1] > 0
        assert {kind for kind, _ in drafter.cache.seqs} == {"done"}  # every session ended: their outputs stay


def test_a_speculative_sessions_output_feeds_the_index(pair) -> None:
    drafter = EdgeDrafter(EdgeDraftConfig("suffix", max_tokens=5))
    edge, ue = _open(pair, PROMPTS[0], drafter, protocol="greedy")
    while not ue.done:
        ue.on_reply(wire(edge.on_draft(wire(ue.next_draft(None)))))
    [(kind, key)] = drafter.cache.seqs
    assert kind == "done" and drafter.cache.tokens((kind, key)) == ue.tokens
    dropped, _ = _open(pair, PROMPTS[1], drafter, protocol="greedy")
    assert sorted(k for k, _ in drafter.cache.seqs) == ["done", "live"]
    dropped.release()  # dropped before its end: it leaves nothing
    assert [k for k, _ in drafter.cache.seqs] == ["done"]


def test_a_run_with_the_edges_drafts_is_the_targets_greedy_output(pair) -> None:
    """A handed-over run of 25 tokens (protocols/edge_run.py), without the edge's drafts and with an index that holds
    the answer: the target's greedy output either way, most drafts accepted in the second."""
    prompt, n = [5, 6, 7, 5, 6, 7, 5, 6], 25
    ref = target_greedy(pair[1], prompt, max_new_tokens=n, eos_token_id=EOS)
    drafter = EdgeDrafter(EdgeDraftConfig("suffix", max_tokens=6))
    drafter.open("a", prompt)
    drafter.commit("a", ref)  # the index holds the answer: most drafts are accepted
    got = []
    for edge_drafter in (None, drafter):
        edge, ue = _open(pair, prompt, edge_drafter, protocol="auto", max_new_tokens=n)
        edge.on_generate(wire(make(MsgType.GENERATE, ue.sid, None, round=0, tokens=n)))
        [chunk] = drain(edge)
        got.append(chunk.header)
        assert chunk.tensors["tokens"].tolist()[:len(ref)] == ref and chunk.header["done"]
    assert "drafted" not in got[0]
    assert n // 2 < got[1]["accepted"] <= got[1]["drafted"]


def _drive(edge: EdgeSession, ue: UESession) -> list:
    verdicts = []
    while not ue.done:
        reply = wire(edge.on_draft(wire(ue.next_draft(None))))
        ue.on_reply(reply)
        verdicts.append(ue.round.verdict)
    return verdicts


@pytest.mark.parametrize("k", [1, 4])
def test_the_edge_extends_a_greedy_draft_and_stays_lossless(pair, k: int) -> None:
    drafter = EdgeDrafter(EdgeDraftConfig("suffix", max_tokens=6))
    edge_accepted = []
    for _lap in range(2):  # the second lap: the index holds the first lap's outputs
        n = 0
        for prompt in PROMPTS:
            edge, ue = _open(pair, prompt, drafter, protocol="greedy", draft_len=k)
            verdicts = _drive(edge, ue)
            assert ue.tokens == target_greedy(pair[1], prompt, max_new_tokens=MAX_NEW, eos_token_id=EOS)
            assert edge.generated == len(ue.tokens) and ue.d.seq[len(prompt):] == ue.tokens  # the drafter caught up
            for v in verdicts:
                assert len(v.edge_tokens) <= (v.edge_drafted or 0) <= k
                assert not v.edge_tokens or v.n_accepted == k or v.done  # only after a wholly accepted draft
            n += sum(len(v.edge_tokens) for v in verdicts)
        edge_accepted.append(n)
    assert edge_accepted[1] > edge_accepted[0] and edge_accepted[1] > 0


def test_only_a_greedy_chain_is_extended(pair) -> None:
    drafter = EdgeDrafter(EdgeDraftConfig("suffix", max_tokens=6))
    edge, ue = _open(pair, PROMPTS[0], drafter, protocol="greedy")
    _drive(edge, ue)  # the index now holds the output
    for protocol in ("fh", "reject", "tree"):
        edge, ue = _open(pair, PROMPTS[0], drafter, protocol=protocol)
        assert all(v.edge_drafted is None and not v.edge_tokens for v in _drive(edge, ue))


@pytest.mark.parametrize("fields, tensors, ok", [
    ({}, {}, True), ({"edge_drafted": 3}, {"edge_tokens": [5, 6]}, True),
    ({"edge_drafted": 2}, {"edge_tokens": []}, True),
    ({"edge_drafted": 1}, {"edge_tokens": [5, 6]}, False), ({"edge_drafted": 2}, {}, False),
    ({}, {"edge_tokens": [5]}, False), ({"edge_drafted": 2}, {"edge_tokens": [5], "path": [0, 1]}, False),
    ({"edge_drafted": 2}, {"edge_tokens": [99]}, False)])
def test_the_wire_checks_a_verdicts_edge_tokens(fields: dict, tensors: dict, ok: bool) -> None:
    msg = make(MsgType.VERDICT, "s", {k: np.asarray(v, np.int32) for k, v in tensors.items()}, round=0, n_accepted=2,
               next_token=7, mismatches=0, queried=0, t_verify_s=0.0, t_head_s=0.0, done=False, **fields)
    if not ok:
        with pytest.raises(WireError):
            decode(encode(msg), LIMITS)
        return
    got = decode(encode(msg), LIMITS)
    v = Verdict.of(got.header, got.tensors)
    assert v.edge_drafted == fields.get("edge_drafted") and list(v.edge_tokens) == tensors.get("edge_tokens", [])
