"""Batched verification on the edge server: sessions served in lockstep batches (fcfs, slo) and without KV reuse
produce exactly the outputs of verifying each session alone; a bad draft in a batch fails alone."""
import math

import numpy as np
import pytest
import torch

from protocols.ue_side import UEParams, UESession
from protocols.wire import Limits, MsgType, decode, encode, make
from testbed.live.edge.edgeserver import EdgeServer
from testbed.live.edge.serveconfig import ServeConfig
from tests.edge_helpers import open_on, token_of
from tests.tiny_pair import make_pair
from wisv.decoding.sessions import DraftSession
from wisv.decoding.speculative import RejectAll, speculative_generate
from wisv.serving.estimator import EstimatorProfile, LiveFit

VOCAB, EOS, K, MAX_NEW = 61, 60, 4, 30
LIMITS = Limits(vocab_size=VOCAB, max_draft_len=16, max_positions=16)
PROMPTS = [[3, 4, 5], [7, 8, 9, 10, 11, 12], [20], [30, 31, 32, 33]]
PROTOCOLS = ["greedy", "fh", "sh", "auto"]


@pytest.fixture(scope="module")
def pair():
    torch.set_num_threads(1)
    return make_pair("llama", 32, 2, 4, 2, vocab=VOCAB, eos=EOS)


def _estimator(tmp_path) -> str:
    prof = EstimatorProfile({"a": 1e-4, "b_compute": 1e-7, "b_read": 1e-6, "c": 1e-3})
    return str(prof.save(tmp_path / "est.json"))


def lockstep(server: EdgeServer, ues: dict[bytes, UESession]) -> None:
    """Every unfinished UE sends its next message; the server handles them together; replies go back."""
    for peer, ue in ues.items():
        assert open_on(server, peer, ue, LIMITS).type == MsgType.OPEN_OK
    outbox = {peer: ue.next_draft(None) for peer, ue in ues.items()}
    while outbox:
        replies = server.handle_many([(peer, encode(m)) for peer, m in outbox.items()])
        assert sorted(p for p, _ in replies) == sorted(outbox)
        outbox = {}
        for peer, frames in replies:
            reply, ue = decode(frames, LIMITS), ues[peer]
            assert reply.type != MsgType.ERROR, reply.header
            nxt = ue.on_reply(reply)
            if nxt is not None:
                outbox[peer] = nxt
            elif not ue.done:
                outbox[peer] = ue.next_draft(None)


def _ues(pair, **params):
    drafter = pair[0]
    return {f"peer{i}".encode(): UESession(f"s{i}", DraftSession(drafter, p), UEParams(
                protocol=proto, draft_len=K, max_new_tokens=MAX_NEW, auto_rule="rtt", **params), EOS)
            for i, (p, proto) in enumerate(zip(PROMPTS, PROTOCOLS))}


@pytest.mark.parametrize("cfg", [dict(batch_verify=True), dict(batch_verify=True, max_batch=2),
                                 dict(batch_verify=True, scheduler="slo", estimator="EST"),
                                 dict(kv_reuse=False), dict(batch_verify=True, kv_reuse=False)],
                         ids=["fcfs", "fcfs-batch2", "slo", "no-kv-reuse", "batched-no-kv-reuse"])
def test_batched_server_equals_sessions_verified_alone(pair, cfg, tmp_path):
    if cfg.get("estimator") == "EST":
        cfg = cfg | {"estimator": _estimator(tmp_path)}
    server = EdgeServer(ServeConfig(max_draft_len=16, **cfg), pair[1], RejectAll())
    sizes, verify = [], server.engine.verify
    server.engine.verify = lambda reqs: sizes.append(len(reqs)) or verify(reqs)
    ues = _ues(pair)
    lockstep(server, ues)
    if cfg.get("batch_verify"):
        assert max(sizes) == min(4, cfg.get("max_batch", 16))  # really batched, never past max_batch
    if cfg.get("estimator"):  # the live correction learnt from the batches it timed
        assert server.batcher.live != LiveFit()  # the online correction learned from the batches
    for ue, prompt in zip(ues.values(), PROMPTS):
        ref = speculative_generate(pair[0], pair[1], prompt, max_new_tokens=MAX_NEW, draft_len=K, eos_token_id=EOS)
        assert ue.done and ue.tokens == ref.tokens


def test_a_bad_draft_fails_alone_and_slo_meta_is_validated(pair, tmp_path):
    server = EdgeServer(ServeConfig(max_draft_len=16, batch_verify=True), pair[1], RejectAll())
    ues = _ues(pair)
    (pa, a), (pb, b) = list(ues.items())[:2]
    for peer, ue in ((pa, a), (pb, b)):
        open_on(server, peer, ue, LIMITS)
    good = a.next_draft(None)
    bad = make(MsgType.DRAFT, "s1", {"tokens": np.array([1] * 9, np.int32)}, round=0, t_draft_s=0.0,
               **b.token)  # K 9 > 4
    out = dict(server.handle_many([(pa, encode(good)), (pb, encode(bad))]))
    assert decode(out[pa], LIMITS).type == MsgType.VERDICT
    err = decode(out[pb], LIMITS)
    assert err.type == MsgType.ERROR and err.header["code"] == "too_large"
    opened = make(MsgType.OPEN, "s9", {"prompt": np.array([3, 4], np.int32)}, protocol="greedy", draft_len=4,
                  max_new_tokens=8, meta={"slo_tok_s": "fast"})
    assert decode(server.handle(b"p9", encode(opened)), LIMITS).header["code"] == "bad_field"
    with pytest.raises(ValueError, match="estimator"):
        EdgeServer(ServeConfig(batch_verify=True, scheduler="slo"), pair[1], RejectAll())


def test_one_batch_per_turn_keeps_the_rest_waiting_and_guards_held_drafts(pair):
    server = EdgeServer(ServeConfig(max_draft_len=16, batch_verify=True, max_batch=2), pair[1], RejectAll())
    ues = _ues(pair)
    for peer, ue in ues.items():
        open_on(server, peer, ue, LIMITS)
    drafts = {peer: ue.next_draft(None) for peer, ue in ues.items()}
    first = dict(server.handle_many([(p, encode(m)) for p, m in drafts.items()], one_batch=True))
    assert len(first) == 2 and len(server.held) == 2  # one batch of max_batch; two DRAFTs still wait
    waiting = [p for p, _ in server.held]
    close = ues[waiting[1]].close_message()
    again = [(p, decode(r, LIMITS)) for p, r in server.handle_many(
        [(waiting[0], encode(drafts[waiting[0]])), (waiting[1], encode(close))], one_batch=True)]
    assert again[0][0] == waiting[0] and again[0][1].header["code"] == "in_progress"  # its DRAFT resent while it waits
    assert again[1][0] == waiting[1] and again[1][1].type == MsgType.CLOSED  # closed while its DRAFT waits
    assert [(p, m.type) for p, m in again[2:]] in ([(waiting[0], MsgType.VERDICT)], [(waiting[0], MsgType.HIDDEN_REQ)])
    verdicts = [decode(r, LIMITS) for _, r in first.items()]
    batches = [v.header.get("batch") for v in verdicts if v.type == MsgType.VERDICT]
    assert batches and set(batches) == {2}  # each verdict reports its batch size
    assert server.held == []  # the closed session's DRAFT was dropped, not verified


def test_deadline_takes_off_the_reported_drafting_and_network_time(pair, tmp_path):
    server = EdgeServer(ServeConfig(max_draft_len=16, batch_verify=True, scheduler="slo",
                                    estimator=_estimator(tmp_path)), pair[1], RejectAll())
    opened = make(MsgType.OPEN, "s0", {"prompt": np.array([3, 4], np.int32)}, protocol="greedy", draft_len=4,
                  max_new_tokens=8, meta={"slo_tok_s": 40.0})
    assert decode(server.handle(b"p0", encode(opened)), LIMITS).type == MsgType.OPEN_OK
    draft = make(MsgType.DRAFT, "s0", {"tokens": np.array([5, 6, 7, 8], np.int32)}, round=0, t_draft_s=0.02,
                 csi={"rtt_ms": 30.0}, **token_of(server, "s0"))
    sess = server._guard(b"p0", encode(draft), server._hold_drafts, t0=123.0)  # stamped on arrival (edge/inbox.py)
    req = server.batcher.request(b"p0", sess)
    # 4 tokens at 40 tok/s = 100 ms, minus 20 ms drafting and 30 ms network: 50 ms after arrival
    assert req.arrival_s == 123.0 and req.deadline_s == pytest.approx(123.05)


def test_batch_slack_defaults_to_the_guard_and_is_checked(pair, tmp_path):
    est = _estimator(tmp_path)
    server = EdgeServer(ServeConfig(batch_verify=True, scheduler="slo", estimator=est, guard_ms=10.0), pair[1],
                        RejectAll())
    assert server.batcher.slack_s is None and server.batcher.guard_s == pytest.approx(0.01)
    server = EdgeServer(ServeConfig(batch_verify=True, scheduler="slo", estimator=est, guard_ms=10.0, slack_ms=0.0),
                        pair[1], RejectAll())
    assert server.batcher.slack_s == 0.0
    with pytest.raises(ValueError, match="slack"):
        EdgeServer(ServeConfig(batch_verify=True, scheduler="slo", estimator=est, slack_ms=-1.0), pair[1], RejectAll())


def test_arrival_reserve_learns_the_tightest_class_budget_from_served_requests(pair, tmp_path):
    server = EdgeServer(ServeConfig(max_draft_len=16, batch_verify=True, scheduler="slo",
                                    estimator=_estimator(tmp_path)), pair[1], RejectAll())
    b = server.batcher
    assert b.reserve and b.tightest_budget_s() == math.inf  # no deadline seen yet: no cap
    opened = make(MsgType.OPEN, "s0", {"prompt": np.array([3, 4], np.int32)}, protocol="greedy", draft_len=4,
                  max_new_tokens=8, meta={"slo_tok_s": 40.0})
    assert decode(server.handle(b"p0", encode(opened)), LIMITS).type == MsgType.OPEN_OK
    draft = make(MsgType.DRAFT, "s0", {"tokens": np.array([5, 6, 7, 8], np.int32)}, round=0, t_draft_s=0.02,
                 csi={"rtt_ms": 30.0}, **token_of(server, "s0"))
    sess = server._guard(b"p0", encode(draft), server._hold_drafts, t0=123.0)
    assert b.select([(b"p0", sess)]) == [(b"p0", sess)]
    assert b.tightest_budget_s() == pytest.approx(0.05)  # 100 ms - 20 ms drafting - 30 ms network
    b.budgets[20.0].extend([0.3, 0.2])  # a looser class does not move it
    b.budgets[40.0].extend([0.06, 0.07])  # the median of the class's recent budgets
    assert b.tightest_budget_s() == pytest.approx(0.06)
    off = EdgeServer(ServeConfig(batch_verify=True, scheduler="slo", estimator=_estimator(tmp_path),
                                 arrival_reserve=False), pair[1], RejectAll())
    assert not off.batcher.reserve


def test_a_tree_batches_with_chains_by_its_round_class(pair):
    """On the batching edge a session's engine request comes from its protocol's round class: a tree's carries its
    parents (TreeRounds.request), a chain's none; every output still equals the target's greedy decoding."""
    server = EdgeServer(ServeConfig(max_draft_len=16, batch_verify=True), pair[1], RejectAll())
    shapes, verify = [], server.engine.verify
    server.engine.verify = lambda reqs: shapes.append([r.parents for r in reqs]) or verify(reqs)
    protocols = ["tree", "greedy", "tree", "fh"]
    ues = {f"peer{i}".encode(): UESession(f"s{i}", DraftSession(pair[0], p), UEParams(
               protocol=proto, draft_len=K, max_new_tokens=MAX_NEW, tree_budget=6), EOS)
           for i, (p, proto) in enumerate(zip(PROMPTS, protocols))}
    lockstep(server, ues)
    trees = [parents for batch in shapes for parents in batch if parents is not None]
    assert max(map(len, shapes)) > 1 and trees and all(t[0] == -1 and len(t) <= 6 for t in trees)
    assert sum(len(b) for b in shapes) == sum(ue.n_rounds for ue in ues.values())  # one request per round
    for ue, prompt in zip(ues.values(), PROMPTS):
        ref = speculative_generate(pair[0], pair[1], prompt, max_new_tokens=MAX_NEW, draft_len=K, eos_token_id=EOS)
        assert ue.done and ue.tokens == ref.tokens
