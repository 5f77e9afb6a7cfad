"""OPEN's handshake on the edge: a drafter whose vocabulary (size or tokenizer hash) or wire-protocol version differs
from the edge's is refused with a message naming both sides; REFERENCE returns the target-only output, cached."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

import protocols.wire as wire
from protocols.handshake import Vocab, vocab_refusal
from protocols.schema import OpenOk
from protocols.ue_side import HandshakeError, UEParams, UESession
from protocols.wire import Limits, MsgType, decode, encode, make
from testbed.live.edge.edgeserver import EdgeServer
from testbed.live.edge.serveconfig import ServeConfig
from tests.edge_helpers import open_on
from tests.testbed.conftest import TOKENIZER_DIR
from tests.tiny_pair import make_pair
from wisv.decoding.sessions import DraftSession
from wisv.decoding.speculative import RejectAll
from wisv.models.loader import vocab_facts, vocab_hash
from wisv.tasks.evaluate import greedy_reference

K, MAX_NEW = 4, 12
PROMPT = [1, 51, 28, 223, 19]


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)


@pytest.fixture(scope="module")
def pair(tok):
    torch.set_num_threads(1)
    return make_pair(vocab=len(tok), eos=tok.eos_token_id, bos=tok.bos_token_id, pad=tok.pad_token_id)


@pytest.fixture(scope="module")
def server(pair, tok):
    return EdgeServer(ServeConfig(max_draft_len=8, session_timeout_s=30.0), pair[1], RejectAll(), tok, "none")


def swapped_tokenizer(tok, tmp_path: Path):
    """The same tokenizer with two ordinary tokens' ids swapped: same size, another vocabulary."""
    tok.save_pretrained(tmp_path)
    doc = json.loads((tmp_path / "tokenizer.json").read_text())
    vocab = doc["model"]["vocab"]
    a, b = sorted(t for t in vocab if t.isalpha() and len(t) > 3)[:2]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    return AutoTokenizer.from_pretrained(tmp_path)


def open_reply(server: EdgeServer, drafter, vocab: Vocab | None, peer: bytes = b"p"):
    params = UEParams(protocol="fh", draft_len=K, max_new_tokens=MAX_NEW, vocab=vocab)
    ue = UESession("s0", DraftSession(drafter, PROMPT), params, None)
    return open_on(server, peer, ue, Limits(vocab_size=drafter.config.vocab_size)), ue


def test_the_vocabulary_hash_is_of_sorted_token_id_pairs(tok, tmp_path):
    h = vocab_hash(tok)
    assert len(h) == 64 and h == vocab_hash(AutoTokenizer.from_pretrained(TOKENIZER_DIR))
    assert vocab_hash(swapped_tokenizer(tok, tmp_path)) != h
    assert vocab_hash(None) is None
    model = make_pair(vocab=61, eos=60)[1]
    assert vocab_facts(model, None) == (61, None) and vocab_facts(model, tok) == (len(tok), h)


@pytest.mark.parametrize("drafter, target, names", [
    (Vocab(61), Vocab(637, "a" * 64), ["61", "637", "vocabulary size"]),
    (Vocab(637, "b" * 64), Vocab(637, "a" * 64), ["bbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaa", "tokenizer mismatch"]),
])
def test_refusals_name_both_sides(drafter, target, names):
    why = vocab_refusal(drafter, target)
    assert why is not None and all(n in why for n in names)
    assert vocab_refusal(target, target) is None and vocab_refusal(Vocab(637), target) is None  # no hash: size only


def test_a_matching_drafter_is_served_and_gets_the_edge_settings(server, pair, tok):
    reply, ue = open_reply(server, pair[0], Vocab(*vocab_facts(pair[0], tok)))
    assert reply.type == MsgType.OPEN_OK, reply.header
    assert reply.header["vocab_hash"] == vocab_hash(tok)
    assert reply.header["edge"]["head"] == "none" and reply.header["edge"]["max_draft_len"] == 8
    ue.check_open_ok(OpenOk.of(reply.header))  # the UE's own check passes


def test_a_drafter_with_another_vocabulary_size_is_refused_naming_both(server, tok):
    small = make_pair(vocab=61, eos=60)[0]
    reply, _ = open_reply(server, small, Vocab(*vocab_facts(small, None)))
    assert (reply.type, reply.header["code"]) == (MsgType.ERROR, "vocab_mismatch")
    assert "61 tokens" in reply.header["text"] and f"has {len(tok)}" in reply.header["text"]


def test_a_drafter_with_another_tokenizer_is_refused_naming_both(server, pair, tok, tmp_path):
    other = swapped_tokenizer(tok, tmp_path)
    reply, ue = open_reply(server, pair[0], Vocab(*vocab_facts(pair[0], other)))
    assert (reply.type, reply.header["code"]) == (MsgType.ERROR, "vocab_mismatch")
    assert vocab_hash(other)[:16] in reply.header["text"] and vocab_hash(tok)[:16] in reply.header["text"]
    with pytest.raises(HandshakeError, match="tokenizer mismatch"):  # the UE refuses such an edge too
        ue.check_open_ok(OpenOk(target_hidden=32, vocab_size=len(tok), vocab_hash=vocab_hash(tok)))


def test_another_wire_version_is_refused_naming_both(server, monkeypatch):
    monkeypatch.setattr(wire, "WIRE_VERSION", wire.WIRE_VERSION + 1)
    frames = encode(make(MsgType.PING, "s0", None, seq=0, t_send=0.0))
    monkeypatch.undo()
    reply = decode(server.handle(b"p", frames), Limits(vocab_size=61))
    assert (reply.type, reply.header["code"]) == (MsgType.ERROR, "bad_version")
    assert f"version {wire.WIRE_VERSION + 1}" in reply.header["text"]
    assert f"speaks version {wire.WIRE_VERSION}" in reply.header["text"]


def test_reference_is_the_target_only_output_and_cached(server, pair, tok):
    msg = make(MsgType.REFERENCE, "r0", {"prompt": np.asarray(PROMPT, np.int32)}, max_new_tokens=MAX_NEW)
    limits = Limits(vocab_size=len(tok))
    first, again = (decode(server.handle(b"p", encode(msg)), limits) for _ in range(2))
    want = greedy_reference(pair[1], PROMPT, MAX_NEW)
    assert first.tensors["tokens"].tolist() == want == again.tensors["tokens"].tolist()
    assert (first.header["cached"], again.header["cached"]) == (False, True)
    other = make(MsgType.REFERENCE, "r0", {"prompt": np.asarray(PROMPT, np.int32)}, max_new_tokens=MAX_NEW,
                 vocab_size=61)  # refused before any work, like OPEN
    reply = decode(server.handle(b"p", encode(other)), limits)
    assert reply.header["code"] == "vocab_mismatch" and "61 tokens" in reply.header["text"]
    big = make(MsgType.REFERENCE, "r0", {"prompt": np.asarray(PROMPT, np.int32)}, max_new_tokens=10**6)
    reply = decode(server.handle(b"p", encode(big)), limits)
    assert reply.header["code"] == "too_large" and "--max-session-tokens" in reply.header["text"]
