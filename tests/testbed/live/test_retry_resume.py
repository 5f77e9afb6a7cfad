"""The UE's retries and resume over real loopback sockets, against an in-process edge that loses a reply or forgets
its sessions (a restart) at a chosen DRAFT: the run completes with the target's greedy output, and the round's
record counts the resend or the resume (server-only too: a lost CHUNK is asked for again by its index); an edge that
never answers fails the run within its retry window."""
from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
import torch
import zmq

from protocols.wire import MsgType
from testbed.live.edge.edgeserver import EdgeServer
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.ue import ue
from testbed.live.ue.retry import RetryExhausted, Window, backoff_s
from wisv.decoding.speculative import RejectAll
from wisv.models.loader import load_model, load_tokenizer
from wisv.tasks.evaluate import greedy_reference

PROMPT = [1, 51, 28, 223, 19, 20, 13, 21, 33]  # BOS + "Q: 12+3?" in the built-in tokenizer
MAX_NEW, K, FAULT_AT = 32, 4, 3  # token budget, draft length, the DRAFT (counted from 1) that meets the fault


class Edge:
    """An EdgeServer behind a ROUTER on a loopback port, served by a thread; ``fault(server)`` runs at the
    FAULT_AT-th DRAFT and returns whether that DRAFT's reply is sent."""

    def __init__(self, server: EdgeServer, fault: Callable[[EdgeServer], bool]):
        self.server, self.fault, self.drafts = server, fault, 0
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.bind("tcp://127.0.0.1:*")
        self.endpoint = self.sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            if not self.sock.poll(50):
                continue
            peer, *frames = self.sock.recv_multipart()
            send = True
            if frames[0][0] == MsgType.DRAFT:
                self.drafts += 1
                if self.drafts == FAULT_AT:
                    send = self.fault(self.server)
            reply = self.server.handle(peer, frames)
            if send:
                self.sock.send_multipart([peer, *reply])

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close(0)
        self.ctx.term()


def restart(server: EdgeServer) -> bool:
    """Forget every session, as a restarted edge would; the DRAFT is then answered ERROR unknown_session."""
    for token in list(server.sessions):
        server._drop(token)
    return True


def lose_reply(server: EdgeServer) -> bool:
    """Verify and commit the DRAFT but lose its VERDICT on the way back."""
    return False


@pytest.fixture(scope="module")
def target(pair_dirs):
    torch.set_num_threads(1)
    return load_model(Path(pair_dirs.target), "target", "cpu", torch.float32)


@pytest.fixture
def edge_with(pair_dirs, target) -> Iterator[Callable]:
    edges = []

    def start(fault: Callable[[EdgeServer], bool]) -> Edge:
        server = EdgeServer(ServeConfig(max_draft_len=16), target, RejectAll(), load_tokenizer(pair_dirs.target,
                                                                                                "target"), "none")
        edges.append(Edge(server, fault))
        return edges[-1]

    yield start
    for e in edges:
        e.close()


def ue_config(pair_dirs, tmp_path: Path, endpoint: str, protocol: str, **kw) -> ue.UEConfig:
    f = tmp_path / "prompts.jsonl"
    f.write_text(json.dumps({"prompt_ids": PROMPT, "prompt_id": "p0"}) + "\n")
    return ue.UEConfig(connect=endpoint, prompts_file=str(f), out=str(tmp_path / "o"), drafter=str(pair_dirs.drafter),
                       protocol=protocol, draft_len=K, max_new_tokens=MAX_NEW, probe_bytes=0, **kw)


@pytest.mark.parametrize("protocol", ["greedy", "sh", "tree"])
@pytest.mark.parametrize("fault,column", [(restart, "resumed"), (lose_reply, "retries")], ids=["restart", "lost"])
def test_a_round_survives_a_lost_reply_or_a_restarted_edge(pair_dirs, target, edge_with, tmp_path, protocol, fault,
                                                           column) -> None:
    edge = edge_with(fault)
    cfg = ue_config(pair_dirs, tmp_path, edge.endpoint, protocol, recv_timeout_s=0.5, retry_s=20.0)
    [s] = ue.run(cfg)
    assert edge.drafts > FAULT_AT  # the fault met a round in the middle of the prompt
    out = pd.read_json(tmp_path / "o" / "outputs.jsonl", lines=True)
    assert out["tokens"][0] == greedy_reference(target, PROMPT, MAX_NEW) and s["errors"] == 0
    rounds = pd.read_csv(tmp_path / "o" / "rounds.csv")
    assert list(rounds["round"]) == list(range(len(rounds)))  # each round recorded once
    assert rounds["committed"].sum() == len(out["tokens"][0])  # no token committed twice
    hit = rounds[rounds[column] > 0]
    assert list(hit["round"]) == [FAULT_AT - 1] and hit[column].iloc[0] == 1
    other = "retries" if column == "resumed" else "resumed"
    assert rounds[other].sum() == 0


def test_an_edge_that_never_answers_fails_the_run_within_the_window(pair_dirs, tmp_path, capsys) -> None:
    ctx = zmq.Context()
    silent = ctx.socket(zmq.ROUTER)  # takes connections and messages, answers nothing
    silent.bind("tcp://127.0.0.1:*")
    endpoint = silent.getsockopt(zmq.LAST_ENDPOINT).decode()
    cfg = ue_config(pair_dirs, tmp_path, endpoint, "greedy", recv_timeout_s=0.3, retry_s=2.0)
    argv = ["--connect", endpoint, "--prompts-file", cfg.prompts_file, "--out", cfg.out, "--drafter", cfg.drafter,
            "--recv-timeout-s", "0.3", "--retry-s", "2"]
    try:
        t0 = time.monotonic()
        with pytest.raises(SystemExit) as e:
            ue.main(argv)
        assert e.value.code == 2 and time.monotonic() - t0 < 15
    finally:
        silent.close(0)
        ctx.term()
    err = capsys.readouterr().err
    assert re.search(r"waiting for tcp://127\.0\.0\.1:\d+: no answer yet \(no reply within 0\.3 s", err)
    assert re.search(r"testbed\.ue: error: PING of session ue0 to the edge at tcp://127\.0\.0\.1:\d+: no reply within "
                     r"0\.3 s \(--recv-timeout-s\); gave up after \d+ attempts in [\d.]+ s \(retry window 2 s, "
                     r"--retry-s\)", err)


def test_backoff_doubles_up_to_a_cap_and_the_window_bounds_the_attempts() -> None:
    assert [backoff_s(n) for n in range(6)] == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0]
    now = [0.0]
    window = Window(3.0, "PING", clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    for _ in range(3):
        window.next_attempt("timeout")  # waits 0.25, 0.5, 1.0: 1.75 s spent
    with pytest.raises(RetryExhausted, match=r"PING: timeout; gave up after 4 attempts in 1\.8 s"):
        window.next_attempt("timeout")  # 2 s more would end past 3 s
    assert window.resends == 3


def test_a_silent_edge_is_noted_at_the_first_resend_and_then_every_ten_seconds() -> None:
    now = [0.0]
    window = Window(60.0, "PING", clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    due = []
    for _ in range(8):
        due.append((round(now[0], 2), window.note_due()))
        window.next_attempt("timeout")
        now[0] += 1.0  # the receive timeout of the next attempt
    assert [t for t, d in due if d] == [0.0, 12.75, 22.75]  # 0.25 s backoff doubling to 4 s, plus 1 s timeouts


class StreamEdge(Edge):
    """An Edge that also streams (``handle_many`` every turn, as testbed.serve's loop); ``fault(server)`` runs at the
    FAULT_AT-th CHUNK and returns whether that CHUNK is sent."""

    def _serve(self) -> None:
        while not self.stop.is_set():
            items = []
            while len(items) < 16 and self.sock.poll(0 if self.server.streams or items else 50):
                peer, *frames = self.sock.recv_multipart()
                items.append((peer, frames))
            for peer, reply in self.server.handle_many(items):
                if reply[0][0] == MsgType.CHUNK:
                    self.drafts += 1
                    if self.drafts == FAULT_AT and not self.fault(self.server):
                        continue
                self.sock.send_multipart([peer, *reply])


@pytest.mark.parametrize("fault,columns", [(lambda s: restart(s) and False, ("retries", "resumed")),
                                           (lose_reply, ("retries",))], ids=["restart", "lost"])
def test_a_stream_survives_a_lost_chunk_or_a_restarted_edge(pair_dirs, target, tmp_path, fault, columns) -> None:
    server = EdgeServer(ServeConfig(max_draft_len=16), target, RejectAll(), load_tokenizer(pair_dirs.target, "target"),
                        "none")
    edge = StreamEdge(server, fault)
    try:
        [s] = ue.run(ue_config(pair_dirs, tmp_path, edge.endpoint, "server", recv_timeout_s=0.5, retry_s=20.0))
    finally:
        edge.close()
    out = pd.read_json(tmp_path / "o" / "outputs.jsonl", lines=True)
    assert out["tokens"][0] == greedy_reference(target, PROMPT, MAX_NEW) and s["errors"] == 0
    rounds = pd.read_csv(tmp_path / "o" / "rounds.csv")
    assert list(rounds["round"]) == list(range(len(rounds))) and rounds["committed"].sum() == len(out["tokens"][0])
    for column in ("retries", "resumed"):  # the round waiting for the lost chunk asked again (and re-OPENed)
        hit = rounds[rounds[column] > 0]
        assert list(hit["round"]) == ([FAULT_AT - 1] if column in columns else []), column
