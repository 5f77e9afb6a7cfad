"""Typed messages after decode: a VERDICT and an OPEN_OK read as fields, with the wire's defaults filled in."""
import numpy as np
import pytest

from protocols.schema import OpenOk, Verdict
from protocols.wire import Limits, MsgType, decode, encode, make

LIMITS = Limits(vocab_size=100)
TIMES = {"t_verify_s": 0.02, "t_head_s": 0.005}


def verdict(tensors=None, **extra):
    msg = make(MsgType.VERDICT, "s", tensors, round=3, n_accepted=2, next_token=7, mismatches=1, queried=1,
               done=False, **TIMES, **extra)
    return decode(encode(msg), LIMITS)


def test_a_verdict_without_the_optional_fields_gets_their_defaults():
    v = Verdict.of(verdict().header)
    assert (v.round, v.n_accepted, v.next_token, v.mismatches, v.queried, v.done) == (3, 2, 7, 1, 1, False)
    assert v.t_edge_s == pytest.approx(0.025) and (v.batch, v.stop_depth, v.path) == (1, None, ())


def test_a_verdict_with_every_field_and_a_tree_path():
    msg = verdict({"path": np.asarray([0, 2], np.int32)}, t_edge_s=0.1, batch=4, stop_depth=5)
    v = Verdict.of(msg.header, msg.tensors)
    assert (v.t_edge_s, v.batch, v.stop_depth, v.path) == (0.1, 4, 5, (0, 2))


def test_an_open_ok_reads_its_facts_and_defaults():
    full = make(MsgType.OPEN_OK, "s", target_hidden=64, vocab_size=100, hidden_layer=-2, vocab_hash="a" * 64,
                edge={"head": "none"}, token="b" * 32)
    ok = OpenOk.of(decode(encode(full), LIMITS).header)
    assert (ok.target_hidden, ok.vocab_size, ok.hidden_layer, ok.vocab_hash, ok.edge, ok.token) == \
        (64, 100, -2, "a" * 64, {"head": "none"}, "b" * 32)
    bare = OpenOk.of(decode(encode(make(MsgType.OPEN_OK, "s", target_hidden=64, vocab_size=100)), LIMITS).header)
    assert (bare.hidden_layer, bare.vocab_hash, bare.edge, bare.token) == (-1, None, None, None)
