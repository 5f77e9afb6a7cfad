"""Fault test: the wire fuzz corpus (tests/protocols/test_wire_fuzz.py) sent to a batching edge process over real
loopback sockets.  The edge answers every message (an undecodable one with the ERROR code decode names, none with an
internal error), stays up, and a well-behaved UE process running meanwhile completes with the target's output."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from protocols.wire import Limits, MsgType, WireError, decode, encode, make
from testbed.live.edge.intake import UNKNOWN_TYPE, caps, edge_limits
from testbed.live.orchestrate.procs import Child
from tests.protocols.test_wire_fuzz import CORPUS, seed_frames

EXAMPLES = 120  # messages drawn from each strategy of the corpus
MAX_DRAFT = 8  # the edge's --max-draft-len (its decode limits follow)
EDGE_PROBE_BYTES = 2**20  # testbed.serve's default --max-probe-bytes
RECV_TIMEOUT_MS = 30_000  # a lost reply fails the test instead of hanging it
UE_TIMEOUT_S = 300


def draw_corpus(strategy: st.SearchStrategy, n: int) -> list[list[bytes]]:
    """n examples of a strategy (derandomized, no database, no shrinking)."""
    out: list[list[bytes]] = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def grab(frames: list[bytes]) -> None:
        out.append(frames)

    grab()
    return out


@pytest.fixture(scope="module")
def edge(pair_dirs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Child, str]]:
    """``python -m testbed.serve --batch-verify`` on a free loopback port; always stopped by its PID."""
    log = tmp_path_factory.mktemp("edge") / "edge.log"
    args = ["testbed.serve", "--bind", "tcp://127.0.0.1:0", "--target", str(pair_dirs.target), "--head", "none",
            "--batch-verify", "--max-draft-len", str(MAX_DRAFT)]
    child = Child("edge", args, log)
    try:
        yield child, child.wait_for("READY", 120)
    finally:
        child.stop()


def start_ue(endpoint: str, drafter: Path, out: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "testbed.ue", "--connect", endpoint, "--drafter", str(drafter), "--out", str(out),
           "--prompts", "3", "--protocol", "greedy", "--draft-len", "4", "--max-new-tokens", "24",
           "--probe-bytes", "256"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=(out.parent / "ue.log").open("w"))


def exchange(sock: zmq.Socket, frames: list[bytes], limits: Limits) -> str:
    """Send one corpus message and check its one reply; its type, or its ERROR code."""
    sock.send_multipart(frames)
    try:
        reply = decode(sock.recv_multipart(), Limits(vocab_size=limits.vocab_size, max_draft_len=1 << 16))
    except zmq.Again:
        pytest.fail(f"no reply within {RECV_TIMEOUT_MS} ms to {frames!r}")
    cap = caps(limits).get(frames[0][0] if frames[0] else -1, UNKNOWN_TYPE)
    if len(frames) > cap.parts or sum(len(f) for f in frames) > cap.nbytes:  # dropped unread (edge/intake.py)
        assert (reply.type, reply.header["code"]) == (MsgType.ERROR, "too_large"), (frames, reply.header)
        return "too_large"
    try:
        decode(frames, limits)
    except WireError as e:  # what the edge must have answered
        assert (reply.type, reply.header["code"]) == (MsgType.ERROR, e.code), (frames, reply.header)
    if reply.type == MsgType.ERROR:
        assert reply.header["code"] != "internal", (frames, reply.header)
        return reply.header["code"]
    return reply.type.name


def test_fuzz_corpus_against_a_batching_edge_while_a_ue_completes(edge, pair_dirs, tmp_path: Path) -> None:
    child, endpoint = edge
    limits = edge_limits(pair_dirs.vocab_size, MAX_DRAFT, EDGE_PROBE_BYTES)  # the edge's own decode limits
    drawn = [f for strategy in CORPUS.values() for f in draw_corpus(strategy, EXAMPLES) if f]  # [] cannot be sent
    ping = encode(make(MsgType.PING, "s1", None, seq=1, t_send=0.0, reply_bytes=64))
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, b"fuzzer")
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
    sock.connect(endpoint)
    seeds = seed_frames()
    sock.send_multipart(seeds[1])  # the seed OPEN, then its DRAFT with the session's token reaches the batcher
    token = decode(sock.recv_multipart(), limits).header["token"]
    draft = decode(seeds[0], limits)
    seeds.append(encode(make(MsgType.DRAFT, draft.session, draft.tensors, **draft.header, token=token)))
    corpus = 2 * [ping, *seeds] + drawn
    (tmp_path / "ue").mkdir()
    ue = start_ue(endpoint, pair_dirs.drafter, tmp_path / "ue" / "out")
    sent, seen = 0, Counter()
    try:
        while sent < len(corpus) or ue.poll() is None:  # the whole corpus, and on while the UE runs
            seen[exchange(sock, corpus[sent % len(corpus)], limits)] += 1
            sent += 1
        assert ue.wait(UE_TIMEOUT_S) == 0, (tmp_path / "ue" / "ue.log").read_text()
        exchange(sock, encode(make(MsgType.PING, "after", None, seq=1, t_send=0.0)), limits)
    finally:
        if ue.poll() is None:
            ue.kill()
        ctx.destroy(linger=0)
    assert child.proc.poll() is None, "the edge process died"
    summary = json.loads((tmp_path / "ue" / "out" / "summary.json").read_text())
    assert (summary["prompts"], summary["errors"], summary["matches_target"]) == (3, 0, 1.0)
    assert sent >= len(corpus) > 3 * EXAMPLES
    print(f"{sent} messages, replies {dict(seen.most_common())}")
    assert len(seen) >= 8 and all(seen[t] for t in ("PONG", "OPEN_OK", "REFERENCE_OK", "VERDICT"))  # past decoding
