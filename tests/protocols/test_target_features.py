"""Target features across the link: asked for at OPEN, granted in OPEN_OK, carried by the VERDICT, validated."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from protocols.edge_side import EdgeSession, feature_grant
from protocols.errors import EdgeError
from protocols.typed import OpenOk, Verdict
from protocols.ue_side import HandshakeError, UEParams, UESession
from protocols.wire import (
    WIRE_VERSION,
    Limits,
    Message,
    MsgType,
    WireError,
    decode,
    encode,
    make,
)
from tests.tiny_pair import make_pair
from wisv.decoding.sessions import DraftSession, VerifySession
from wisv.decoding.speculative import RejectAll

VOCAB, EOS, K, D = 61, 60, 4, 32
LIMITS = Limits(vocab_size=VOCAB, max_draft_len=16, max_positions=16)
PROMPT = [3, 4, 5]


def session(asks: int, protocol: str = "greedy", hidden_layer: int = -1):
    """(UE session, edge session, target) of one prompt on the tiny pair, after OPEN and OPEN_OK."""
    drafter, target = make_pair("llama", D, 2, 4, 2, vocab=VOCAB, eos=EOS)
    params = UEParams(protocol=protocol, draft_len=K, max_new_tokens=12, target_features=asks)
    ue = UESession("ue-0", DraftSession(drafter, PROMPT), params, EOS)
    open_msg = decode(encode(ue.open_message()), LIMITS)
    edge = EdgeSession("ue-0", VerifySession(target, PROMPT, hidden_layer), open_msg, RejectAll(), 0.5, EOS)
    ok = make(MsgType.OPEN_OK, "ue-0", target_hidden=D, vocab_size=VOCAB, **edge.open_ok_fields())
    return ue, edge, target, open_msg, decode(encode(ok), LIMITS)


def verdict(n_accepted: int = 1, **tensors) -> Message:
    return make(MsgType.VERDICT, "s1", tensors, round=0, n_accepted=n_accepted, next_token=7, mismatches=0, queried=0,
                t_verify_s=0.0, t_head_s=0.0, done=False)


def test_a_ue_that_does_not_ask_gets_the_messages_it_always_got():
    ue, edge, _, open_msg, ok = session(0)
    assert "features" not in open_msg.header and "features" not in ok.header and edge.feature_rows == 0
    reply = edge.on_draft(decode(encode(ue.next_draft(None)), LIMITS))
    assert reply.type == MsgType.VERDICT and "features" not in reply.tensors
    h = reply.header  # the same frames as a VERDICT built with the fields of wire version 4 (only "v" moved on)
    old = make(MsgType.VERDICT, "ue-0", None, **{k: h[k] for k in ("round", "n_accepted", "next_token", "mismatches",
                                                                  "queried", "t_verify_s", "t_head_s", "t_edge_s",
                                                                  "batch", "done")})
    assert encode(reply) == encode(old) and WIRE_VERSION == 10


@pytest.mark.parametrize("protocol", ["greedy", "ef", "tree"])
def test_the_verdict_carries_the_state_that_gave_its_next_token(protocol):
    ue, edge, target, open_msg, ok = session(1, protocol)
    assert open_msg.header["features"] == 1 and ok.header["features"] == 1
    ue.check_open_ok(OpenOk.of(ok.header))
    for _ in range(2):
        reply = decode(encode(edge.on_draft(decode(encode(ue.next_draft(None)), LIMITS))), LIMITS)
        f = reply.tensors["features"]
        assert f.shape == (1, D) and f.dtype == np.float16
        seq = edge.verify.seq  # committed: the last token is the VERDICT's next token
        with torch.no_grad():
            h = target(torch.tensor([seq]), output_hidden_states=True).hidden_states[-1][0]  # [L, D]
        assert torch.allclose(torch.from_numpy(f[0].astype(np.float32)), h[len(seq) - 2], atol=2e-2)
        with pytest.raises(AttributeError):  # a plain DraftSession takes no features: the feature drafter does
            ue.on_reply(reply)
        ue.round.verdict = Verdict.of(reply.header, reply.tensors)
        ue.tokens.extend([0] * (reply.header["n_accepted"] + 1))
        ue.d.commit(seq[len(ue.d.seq):])
        ue.n_rounds += 1


def test_more_rows_follow_the_committed_positions():
    ue, edge, target, _, _ = session(3)
    reply = edge.on_draft(decode(encode(ue.next_draft(None)), LIMITS))
    n = min(3, reply.header["n_accepted"] + 1)
    seq = edge.verify.seq
    with torch.no_grad():
        h = target(torch.tensor([seq]), output_hidden_states=True).hidden_states[-1][0]
    got = torch.from_numpy(reply.tensors["features"].astype(np.float32))
    assert got.shape == (n, D) and torch.allclose(got, h[len(seq) - 1 - n: len(seq) - 1], atol=2e-2)


def test_an_edge_that_cannot_grants_none_and_the_ue_that_asked_stops():
    assert feature_grant(2, VerifySession(make_pair("llama", D, 2, 4, 2, vocab=VOCAB)[1], PROMPT, -2)) == 0
    ue, _, _, _, ok = session(1, hidden_layer=-2)
    assert ok.header["features"] == 0
    with pytest.raises(HandshakeError, match="grants none"):
        ue.check_open_ok(OpenOk.of(ok.header))
    with pytest.raises(HandshakeError, match="asked for 1"):
        ue.check_open_ok(OpenOk(target_hidden=D, vocab_size=VOCAB, features=2))


def test_the_ue_refuses_features_it_was_not_granted():
    ue, edge, _, _, ok = session(0)
    reply = edge.on_draft(decode(encode(ue.next_draft(None)), LIMITS))
    unasked = verdict(reply.header["n_accepted"], features=np.zeros((1, D), np.float16))
    unasked.header["round"] = 0
    with pytest.raises(EdgeError, match="granted 0 rows"):
        ue.on_reply(unasked)
    ue, edge, _, _, ok = session(1)
    ue.check_open_ok(OpenOk.of(ok.header))
    ue.next_draft(None)
    with pytest.raises(EdgeError, match="width 32"):
        ue.on_reply(verdict(0, features=np.zeros((1, D + 1), np.float16)))


OK = np.zeros((1, 8), np.float16)


@pytest.mark.parametrize("msg, code", [
    (verdict(0, features=OK.astype(np.float32)), "bad_dtype"),
    (verdict(0, features=OK[0]), "bad_shape"),
    (verdict(0, features=np.zeros((2, 8), np.float16)), "shape_mismatch"),  # 2 rows, 1 token committed
    (verdict(0, features=np.full((1, 8), np.nan, np.float16)), "bad_features"),
    (verdict(0, features=np.full((1, 8), np.inf, np.float16)), "bad_features"),
    (verdict(0, features=np.zeros((1, 0), np.float16)), "bad_shape"),
    (verdict(16, features=np.zeros((17, 8), np.float16)), "too_large"),  # rows > max_feature_rows (16 here)
    (verdict(0, features=np.zeros((1, 17), np.float16)), "too_large"),  # width > max_hidden_dim (16 here)
    (make(MsgType.OPEN, "s", {"prompt": np.array([1], np.int32)}, protocol="greedy", draft_len=4, max_new_tokens=8,
          features=17), "bad_field"),
    (make(MsgType.OPEN, "s", {"prompt": np.array([1], np.int32)}, protocol="greedy", draft_len=4, max_new_tokens=8,
          features=True), "bad_field"),
    (make(MsgType.OPEN, "s", {"prompt": np.array([1], np.int32)}, protocol="greedy", draft_len=4, max_new_tokens=8,
          features=-1), "bad_field"),
    (make(MsgType.OPEN_OK, "s", target_hidden=8, vocab_size=VOCAB, features=1.0), "bad_field"),
])
def test_hostile_feature_fields_are_refused_on_decode(msg, code):
    small = Limits(vocab_size=VOCAB, max_draft_len=16, max_hidden_dim=16, max_feature_rows=16)
    try:
        frames = encode(msg)
    except WireError as e:  # what the sender's own encode already refuses
        assert e.code == code
        return
    with pytest.raises(WireError) as e:
        decode(frames, small)
    assert e.value.code == code, e.value


def test_good_feature_fields_round_trip():
    small = Limits(vocab_size=VOCAB, max_draft_len=16, max_hidden_dim=16, max_feature_rows=16)
    f = np.arange(16, dtype=np.float16).reshape(1, 16)
    got = decode(encode(verdict(0, features=f)), small)
    assert np.array_equal(got.tensors["features"], f) and Verdict.of(got.header, got.tensors).features.shape == (1, 16)
    ok = decode(encode(make(MsgType.OPEN_OK, "s", target_hidden=8, vocab_size=VOCAB, features=16)), small)
    assert OpenOk.of(ok.header).features == 16 and OpenOk.of({"target_hidden": 8, "vocab_size": 3}).features == 0
