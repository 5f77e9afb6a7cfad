"""Edge and UE protocol state machines driven message by message (no sockets): losslessness, SH queries, errors."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from channel.csi import CSI
from protocols.edge_side import EdgeSession
from protocols.ue_side import UEParams, UESession
from protocols.wire import Limits, Message, MsgType, decode, encode, make
from testbed.live.edge.edgeserver import EdgeServer
from testbed.live.edge.serveconfig import ServeConfig
from tests.edge_helpers import open_on, session_of
from tests.tiny_pair import make_pair
from wisv.decoding.sessions import DraftSession, VerifySession
from wisv.decoding.speculative import AcceptAll, MismatchPolicy, RejectAll, SpecOutput, speculative_generate

VOCAB, EOS = 61, 60
K, MAX_NEW = 4, 40  # draft length and token budget of every session here
LIMITS = Limits(vocab_size=VOCAB, max_draft_len=16, max_positions=16)
PROMPTS = [[3, 4, 5], [7, 8, 9, 10, 11, 12]]
LONG_RTT, SHORT_RTT = CSI(50.0, 50.0, rtt_ms=40.0), CSI(50.0, 50.0, rtt_ms=2.0)  # auto "rtt" rule: FH, SH
UPLINK = {"greedy": {"tokens"}, "fh": {"tokens", "hidden"}, "sh": {"tokens"}, "reject": {"tokens", "probs"}}


@pytest.fixture(scope="module")
def pair():
    torch.set_num_threads(1)
    return make_pair("llama", 32, 2, 4, 2, vocab=VOCAB, eos=EOS)


@dataclass
class RoundLog:
    """One round as the edge saw the uplink and the UE saw the downlink."""

    draft: Message  # decoded DRAFT
    query: list[int] | None = None  # HIDDEN_REQ positions, if the edge asked
    verdict: dict = field(default_factory=dict)  # VERDICT header


def wire(msg: Message) -> Message:
    """What the peer receives: encode, then decode against the receiver's Limits."""
    return decode(encode(msg), LIMITS)


def open_pair(pair, prompt: list[int], policy: MismatchPolicy | None = None, **params) -> tuple[EdgeSession, UESession]:
    drafter, target = pair
    ue_params = UEParams(**{"draft_len": K, "max_new_tokens": MAX_NEW} | params)
    ue = UESession("ue-0", DraftSession(drafter, prompt), ue_params, EOS)
    edge = EdgeSession("ue-0", VerifySession(target, prompt), wire(ue.open_message()), policy or RejectAll(), 0.5, EOS)
    return edge, ue


def drive(edge: EdgeSession, ue: UESession, csi: Callable[[int], CSI | None] = lambda i: None) -> list[RoundLog]:
    """Run the session to the end, every message crossing the wire format."""
    logs = []
    while not ue.done:
        log = RoundLog(wire(ue.next_draft(csi(ue.n_rounds))))
        reply = wire(edge.on_draft(log.draft))
        while (nxt := ue.on_reply(reply)) is not None:
            log.query = reply.tensors["positions"].tolist()
            reply = wire(edge.on_hidden(wire(nxt)))
        log.verdict = reply.header
        logs.append(log)
    assert edge.done and edge.generated == len(ue.tokens)
    return logs


def reference(pair, prompt: list[int], **kwargs) -> SpecOutput:
    drafter, target = pair
    return speculative_generate(drafter, target, prompt, max_new_tokens=MAX_NEW, draft_len=K, eos_token_id=EOS,
                                **kwargs)


@pytest.mark.parametrize("prompt", PROMPTS, ids=["p3", "p6"])
@pytest.mark.parametrize("protocol", ["greedy", "fh", "sh", "auto"])
def test_rejectall_protocols_equal_greedy_speculative_decoding(pair, protocol: str, prompt: list[int]) -> None:
    edge, ue = open_pair(pair, prompt, protocol=protocol, auto_rule="rtt")
    logs = drive(edge, ue, csi=lambda i: LONG_RTT if i % 2 else SHORT_RTT)
    assert ue.tokens == reference(pair, prompt).tokens
    used = {log.draft.header["protocol"] for log in logs}
    assert used == ({"fh", "sh"} if protocol == "auto" else {protocol})
    for log in logs:
        assert set(log.draft.tensors) == UPLINK[log.draft.header["protocol"]]
    assert [log.verdict["round"] for log in logs] == list(range(len(logs)))
    assert logs[-1].verdict["done"] and not any(log.verdict["done"] for log in logs[:-1])


@pytest.mark.parametrize("prompt", PROMPTS, ids=["p3", "p6"])
def test_sh_requests_hidden_exactly_at_the_mismatches(pair, prompt: list[int]) -> None:
    edge, ue = open_pair(pair, prompt, protocol="sh")
    logs = drive(edge, ue)
    ref = reference(pair, prompt).rounds
    assert len(logs) == len(ref)
    assert any(r.mismatches for r in ref) and not all(r.mismatches for r in ref)  # both paths taken
    compared = 0
    for log, r in zip(logs, ref):
        if r.drafted == 0:  # a one-token budget: the reference drafts nothing, the UE still drafts one
            continue
        assert log.draft.tensors["tokens"].tolist() == r.draft_tokens
        assert log.query == (r.mismatches or None)
        assert log.verdict["mismatches"] == log.verdict["queried"] == len(r.mismatches)
        compared += 1
    assert compared >= len(ref) - 1


def test_fh_with_accept_all_commits_every_full_draft(pair) -> None:
    prompt = PROMPTS[0]
    edge, ue = open_pair(pair, prompt, policy=AcceptAll(), protocol="fh")
    logs = drive(edge, ue)
    assert all(log.verdict["n_accepted"] == len(log.draft.tensors["tokens"]) for log in logs)
    assert any(log.verdict["mismatches"] > 0 for log in logs)  # mismatches existed and were accepted
    assert all(log.query is None for log in logs)
    assert ue.tokens == reference(pair, prompt, rule="wisv", policy=AcceptAll()).tokens


def test_reject_sampling_is_seeded(pair) -> None:
    def sample(seed: int) -> list[int]:
        edge, ue = open_pair(pair, PROMPTS[1], protocol="reject", seed=seed)
        logs = drive(edge, ue)
        assert all(set(log.draft.tensors) == UPLINK["reject"] for log in logs)
        return ue.tokens

    first = sample(7)
    assert sample(7) == first
    assert any(sample(s) != first for s in (8, 9, 10))


# ---------------------------------------------------------------------------------------------- errors


def server_of(pair) -> EdgeServer:
    return EdgeServer(ServeConfig(max_draft_len=16), pair[1], RejectAll())


def ask(server: EdgeServer, peer: bytes, msg: Message) -> Message:
    return decode(server.handle(peer, encode(msg)), LIMITS)


def test_draft_before_open_or_from_another_peer_is_unknown_session(pair) -> None:
    server = server_of(pair)
    draft = make(MsgType.DRAFT, "ue-0", {"tokens": np.array([1, 2], np.int32)}, round=0, t_draft_s=0.0)
    reply = ask(server, b"peer-a", draft)
    assert (reply.type, reply.session, reply.header["code"]) == (MsgType.ERROR, "ue-0", "unknown_session")
    assert "'ue-0'" in reply.header["text"]
    _, ue = open_pair(pair, PROMPTS[0], protocol="greedy")
    assert open_on(server, b"peer-a", ue, LIMITS).type == MsgType.OPEN_OK
    assert ask(server, b"peer-a", draft).header["code"] == "unknown_session"  # no token: no session, whoever sends
    guessed = dataclasses.replace(draft, header=draft.header | {"token": "0" * 32})
    assert ask(server, b"peer-a", guessed).header["code"] == "unknown_session"
    draft.header.update(ue.token)
    assert ask(server, b"peer-b", draft).type == MsgType.VERDICT  # the token finds it, from any identity


def _replace(msg: Message, tensors: dict | None = None, **header) -> Message:
    return dataclasses.replace(msg, tensors=tensors or dict(msg.tensors), header=msg.header | header)


def drop_hidden(m: Message) -> Message:
    return _replace(m, {"tokens": m.tensors["tokens"]})


def one_token_too_many(m: Message) -> Message:
    t = m.tensors["tokens"]  # [k]
    return _replace(m, {"tokens": np.concatenate([t, np.ones(K + 1 - len(t), t.dtype)])})


def claim_sh(m: Message) -> Message:
    return _replace(m, protocol="sh")


def doubled_rows(m: Message) -> Message:
    h = m.tensors["hidden"]  # [m, d]
    return _replace(m, {"hidden": np.concatenate([h, h])})


ERROR_CASES = [  # (protocol, message type to corrupt once, corruption, expected code, word in the text)
    ("fh", MsgType.DRAFT, drop_hidden, "missing_tensor", "'hidden'"),
    ("greedy", MsgType.DRAFT, one_token_too_many, "too_large", f"{K + 1} tokens"),
    ("greedy", MsgType.DRAFT, claim_sh, "bad_protocol", "'sh'"),
    ("sh", MsgType.HIDDEN, doubled_rows, "shape_mismatch", "rows"),
]


@pytest.mark.parametrize("protocol,mtype,corrupt,code,word", ERROR_CASES, ids=lambda c: getattr(c, "__name__", None))
def test_protocol_errors_name_the_problem_and_leave_the_session_usable(
    pair, protocol: str, mtype: MsgType, corrupt: Callable[[Message], Message], code: str, word: str
) -> None:
    server = server_of(pair)
    _, ue = open_pair(pair, PROMPTS[1], protocol=protocol)
    assert open_on(server, b"p", ue, LIMITS).type == MsgType.OPEN_OK
    errors = []
    while not ue.done:
        msg = ue.next_draft(None)
        while msg is not None:
            if msg.type == mtype and not errors:
                errors.append(ask(server, b"p", corrupt(msg)))  # the bad variant first, then the real one
            msg = ue.on_reply(ask(server, b"p", msg))
    assert len(errors) == 1, f"no {mtype.name} was sent to corrupt"
    err = errors[0]
    assert (err.type, err.session, err.header["code"]) == (MsgType.ERROR, "ue-0", code)
    assert word in err.header["text"]
    assert ue.tokens == reference(pair, PROMPTS[1]).tokens
    assert ask(server, b"p", ue.close_message()).type == MsgType.CLOSED and not server.sessions


def test_idle_sessions_are_freed_after_the_timeout(pair) -> None:
    server = EdgeServer(ServeConfig(max_draft_len=16, session_timeout_s=10.0), pair[1], RejectAll())
    _, ue_a = open_pair(pair, PROMPTS[0], protocol="greedy")
    assert open_on(server, b"peer-a", ue_a, LIMITS).type == MsgType.OPEN_OK
    sess = session_of(server, ue_a.sid)
    assert sess.verify.cached_len > 0
    t0 = sess.last_active
    assert server.sweep(now=t0 + 5.0) == 0 and len(server.sessions) == 1
    assert server.sweep(now=t0 + 10.5) == 1 and not server.sessions
    assert sess.verify.cached_len == 0  # KV cache released
    draft = make(MsgType.DRAFT, ue_a.sid, {"tokens": np.array([1], np.int32)}, round=0, t_draft_s=0.0, **ue_a.token)
    assert ask(server, b"peer-a", draft).header["code"] == "unknown_session"


def test_open_beyond_max_sessions_is_refused(pair) -> None:
    server = EdgeServer(ServeConfig(max_draft_len=16, max_sessions=1), pair[1], RejectAll())
    _, ue_a = open_pair(pair, PROMPTS[0], protocol="greedy")
    assert ask(server, b"peer-a", ue_a.open_message()).type == MsgType.OPEN_OK
    reply = ask(server, b"peer-b", ue_a.open_message())
    assert reply.header["code"] == "busy" and "max 1" in reply.header["text"]


def test_a_message_the_full_inbox_refuses_gets_error_busy_naming_its_session(pair) -> None:
    server = EdgeServer(ServeConfig(max_draft_len=16, inbox_max_msgs=3), pair[1], RejectAll())
    _, ue = open_pair(pair, PROMPTS[0], protocol="greedy")
    reply = decode(server.busy(b"peer-a", encode(ue.open_message())), LIMITS)
    assert (reply.type, reply.session, reply.header["code"]) == (MsgType.ERROR, ue.sid, "busy")
    assert "queue is full (3 messages)" in reply.header["text"] and not server.sessions


def test_open_and_reference_beyond_the_context_are_refused_naming_both_numbers(pair) -> None:
    assert pair[1].config.max_position_embeddings == 512
    server = EdgeServer(ServeConfig(max_draft_len=16, max_context_tokens=20), pair[1], RejectAll())
    _, ue = open_pair(pair, PROMPTS[0], protocol="greedy")  # a 3-token prompt
    reference = make(MsgType.REFERENCE, "r0", {"prompt": np.asarray(PROMPTS[0], np.int32)}, max_new_tokens=510)
    for msg in (_replace(ue.open_message(), max_new_tokens=510), reference):
        reply = ask(server, b"peer-a", msg)
        assert (reply.type, reply.header["code"]) == (MsgType.ERROR, "too_large")
        assert "prompt 3 + max_new_tokens 510 = 513 tokens > the target's context 512" in reply.header["text"]
    reply = ask(server, b"peer-a", _replace(ue.open_message(), max_new_tokens=18))
    assert reply.header["code"] == "too_large"
    assert "= 21 tokens > this edge's --max-context-tokens 20" in reply.header["text"]
    assert not server.sessions
    assert ask(server, b"peer-a", _replace(ue.open_message(), max_new_tokens=17)).type == MsgType.OPEN_OK


def test_edge_with_a_head_announces_its_layer_and_tau_and_checks_the_drafter_width(pair) -> None:
    from wisv.head.model import DecisionHead, HeadConfig, HeadPolicy

    policy = HeadPolicy(DecisionHead(HeadConfig(d_draft=32, d_target=32, hidden=4, hidden_layer=-2, tau=0.3)))
    server = EdgeServer(ServeConfig(max_draft_len=16), pair[1], policy)
    assert server.tau == 0.3
    _, ue = open_pair(pair, PROMPTS[0], protocol="fh")
    ok = ask(server, b"peer-a", ue.open_message())
    assert ok.type == MsgType.OPEN_OK and ok.header["hidden_layer"] == -2
    assert session_of(server, ue.sid).verify.hidden_layer == -2
    wrong = make(MsgType.OPEN, "ue-1", {"prompt": np.array(PROMPTS[0], np.int32)}, protocol="sh", draft_len=4,
                 max_new_tokens=8, drafter_hidden=48)
    reply = ask(server, b"peer-a", wrong)
    assert reply.header["code"] == "shape_mismatch" and "drafter hidden size 32" in reply.header["text"]
    assert EdgeServer(ServeConfig(max_draft_len=16, tau=0.9), pair[1], policy).tau == 0.9


@pytest.mark.parametrize("protocol", ["greedy", "fh", "sh"])
def test_proactive_drafting_reuses_tokens_and_stays_lossless(pair, protocol: str) -> None:
    same = (pair[1], pair[1])  # a drafter equal to the target: every block is accepted and the bonus is p_1
    for models in (pair, same):
        for prompt in PROMPTS:
            edge, ue = open_pair(models, prompt, protocol=protocol, proactive=3)
            reused = drafted = 0
            while not ue.done:
                draft = wire(ue.next_draft(None))
                drafted += ue.draft_proactively(lambda: False)  # the verdict is "slow": draft all 3
                reply = wire(edge.on_draft(draft))
                while (nxt := ue.on_reply(reply)) is not None:
                    reply = wire(edge.on_hidden(wire(nxt)))
                reused += ue.round.reused
            assert ue.tokens == reference(models, prompt).tokens
            assert drafted > 0
        if models is same:
            assert reused > 0  # proactive tokens opened later blocks
    edge, ue = open_pair(pair, PROMPTS[0], protocol=protocol, proactive=3)
    ue.next_draft(None)
    assert ue.draft_proactively(lambda: True) == 0  # the reply is already waiting: no proactive token


def test_pipeline_depth_sets_k_from_the_last_verify_time(pair) -> None:
    edge, ue = open_pair(pair, PROMPTS[1], protocol="greedy", pipeline_depth=True, draft_len=8, max_new_tokens=40)
    first = wire(ue.next_draft(None))
    assert len(first.tensors["tokens"]) == 8  # no verify time known yet: the full K
    ue.on_reply(wire(edge.on_draft(first)))
    ue.round.t_draft_s = 8 * 0.002  # 2 ms per drafted token
    ue.round.verdict = dataclasses.replace(ue.round.verdict, t_verify_s=0.010)
    nxt = wire(ue.next_draft(CSI(50.0, 50.0, rtt_ms=4.0)))
    assert len(nxt.tensors["tokens"]) == 3  # (10 ms - 4 ms) / 2 ms
    assert ue.tokens == reference(pair, PROMPTS[1]).tokens[: len(ue.tokens)]


@pytest.mark.parametrize("protocol", ["greedy", "fh", "sh"])
def test_auto_window_is_lossless_and_follows_the_link(pair, protocol) -> None:
    from protocols.ue_side import AUTO_DRAFT_LEN
    edge, ue = open_pair(pair, PROMPTS[1], protocol=protocol, draft_len=AUTO_DRAFT_LEN, draft_len_max=12,
                         max_new_tokens=40)
    assert wire(ue.open_message()).header["draft_len"] == 12  # OPEN declares the largest block
    windows = []
    for log in drive(edge, ue, lambda i: LONG_RTT if i % 2 else SHORT_RTT):
        windows.append(len(log.draft.tensors["tokens"]))
    assert ue.tokens == reference(pair, PROMPTS[1]).tokens
    assert windows[0] == 8 and all(1 <= w <= 12 for w in windows)  # the start window, then chosen per round
    assert ue.window.tau_d_s is not None and ue.window.verify.n > 0  # it learnt from every verdict


def test_ue_follows_the_edges_stop_depth_when_asked(pair) -> None:
    edge, ue = open_pair(pair, PROMPTS[1], protocol="greedy", draft_len=8, follow_stop_depth=True)
    first = wire(ue.next_draft(None))
    verdict = wire(edge.on_draft(first))
    ue.on_reply(dataclasses.replace(verdict, header=verdict.header | {"stop_depth": 3}))
    assert len(wire(ue.next_draft(None)).tensors["tokens"]) == 3
    edge2, ue2 = open_pair(pair, PROMPTS[1], protocol="greedy", draft_len=8)  # not asked: the suggestion is ignored
    v2 = wire(edge2.on_draft(wire(ue2.next_draft(None))))
    ue2.on_reply(dataclasses.replace(v2, header=v2.header | {"stop_depth": 3}))
    assert len(wire(ue2.next_draft(None)).tensors["tokens"]) == 8


def test_an_edge_with_a_pass_rows_plan_pads_its_passes_and_keeps_every_token(pair, tmp_path) -> None:
    plan = tmp_path / "pass_rows.json"
    plan.write_text('{"target_pad_plan": {"2": 5, "3": 5, "4": 5, "5": 7}}')
    server = EdgeServer(ServeConfig(max_draft_len=16, pass_rows=str(plan)), pair[1], RejectAll())
    assert server.pad_plan == {2: 5, 3: 5, 4: 5, 5: 7}
    _, ue = open_pair(pair, PROMPTS[1], protocol="greedy")
    assert open_on(server, b"p", ue, LIMITS).type == MsgType.OPEN_OK
    sess, fed = session_of(server, ue.sid), []
    forward = sess.verify.forward
    sess.verify.forward = lambda ids, *a, **kw: fed.append(len(ids)) or forward(ids, *a, **kw)
    while not ue.done:
        msg = ue.next_draft(None)
        while msg is not None:
            msg = ue.on_reply(ask(server, b"p", msg))
    assert ue.tokens == reference(pair, PROMPTS[1]).tokens
    assert set(fed) <= {5, 7} and 7 in fed  # blocks of K + 1 = 5 rows fed as 7; of 2 to 4 rows near the end, as 5
    with pytest.raises(ValueError, match="not with --batch-verify"):
        EdgeServer(ServeConfig(max_draft_len=16, pass_rows=str(plan), batch_verify=True), pair[1], RejectAll())
    with pytest.raises(ValueError, match="pass-rows benchmark"):
        EdgeServer(ServeConfig(max_draft_len=16, pass_rows=str(tmp_path / "none.json")), pair[1], RejectAll())
