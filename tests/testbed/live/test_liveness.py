"""Liveness over real sockets: a UE killed (-9) or frozen (SIGSTOP: only its missing keepalives can tell) has its
session freed on the edge within the heartbeat timeout, on the single-session and the batching edge, while an idle
UE keeps it; testbed.run's wait stops at once when its edge dies.  Every process here is started by the test and
stopped by its PID."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.live.common.auth import write_keys
from testbed.live.orchestrate.procs import Child, ChildError, wait_with_edge

IVL_MS, TIMEOUT_MS = 200, 1000  # the heartbeats of these tests
SLACK_S = 1.0  # scheduling on a loaded 2-core CI runner

HOLDER = """
import sys, time
from pathlib import Path
from protocols.handshake import Vocab
from protocols.ue_side import UEParams, UESession
from protocols.wire import Limits
from testbed.live.ue.client import Client, open_session
from testbed.live.common.liveness import Heartbeat
from wisv.models.loader import load_model, load_tokenizer, vocab_facts
from wisv.decoding.sessions import DraftSession
import torch, zmq
endpoint, drafter_dir, ivl, timeout = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
name, auth = sys.argv[5], sys.argv[6] or None
drafter = load_model(drafter_dir, "drafter", "cpu", torch.float32)
vocab = Vocab(*vocab_facts(drafter, load_tokenizer(drafter_dir, "drafter")))
client = Client(zmq.Context(), endpoint, name, Limits(vocab_size=int(drafter.config.vocab_size)), 30.0, auth,
                heartbeat=Heartbeat(ivl, timeout))
params = UEParams(protocol="greedy", draft_len=4, max_new_tokens=64, vocab=vocab)
open_session(client, UESession("held-0", DraftSession(drafter, [1, 51, 28]), params, 0))
print("OPENED", flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module", params=["single", "batching", "batching-auth"])
def edge(request, pair_dirs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, str]]:
    """testbed.serve with short heartbeats (and --batch-verify: the engine's KV caches; and --auth: CURVE keys, the
    keepalives on a socket of their own with the same key); its endpoint, log and key dir ("": none)."""
    log = tmp_path_factory.mktemp("edge") / "edge.log"
    args = ["testbed.serve", "--bind", "tcp://127.0.0.1:0", "--target", str(pair_dirs.target), "--head", "none",
            "--heartbeat-ivl-ms", str(IVL_MS), "--heartbeat-timeout-ms", str(TIMEOUT_MS)]
    key_dir = ""
    if request.param.endswith("auth"):
        key_dir = str(log.parent / "keys")
        write_keys(key_dir)
        args += ["--auth", key_dir]
    child = Child("edge", args + (["--batch-verify"] if request.param.startswith("batching") else []), log)
    try:
        yield child.wait_for("READY", 120), log, key_dir
    finally:
        child.stop()


@pytest.fixture
def holder(request, edge, pair_dirs) -> Iterator[tuple[subprocess.Popen, str]]:
    """A UE process holding one open session (and sleeping), and the line the edge logs when it frees that session;
    killed by its PID at the end."""
    name = request.node.name[:40]  # the peer identity: one per test on the module's edge
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, edge[0], str(pair_dirs.drafter), str(IVL_MS),
                             str(TIMEOUT_MS), name, edge[2]], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "OPENED"
        assert f"open session held-0 from peer {name.encode().hex()}" in edge[1].read_text()
        yield proc, rf"peer {name.encode().hex()}[0-9a-f]* disconnected: freed 1 session\(s\)"  # name + random tag
    finally:
        proc.kill()
        proc.wait(30)


def seconds_until_logged(log: Path, line: str, limit_s: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if re.search(line, log.read_text(errors="replace")):
            return time.monotonic() - t0
        time.sleep(0.02)
    pytest.fail(f"the edge did not free the session within {limit_s:.1f} s:\n{log.read_text()[-2000:]}")


def test_a_killed_ue_has_its_session_freed_within_the_heartbeat_timeout(edge, holder) -> None:
    os.kill(holder[0].pid, signal.SIGKILL)
    assert seconds_until_logged(edge[1], holder[1], 10 * TIMEOUT_MS / 1e3) < TIMEOUT_MS / 1e3


def test_a_frozen_ue_has_its_session_freed_by_the_heartbeat(edge, holder) -> None:
    os.kill(holder[0].pid, signal.SIGSTOP)  # the TCP connection stays up: only the missing PONGs tell
    took = seconds_until_logged(edge[1], holder[1], 10 * TIMEOUT_MS / 1e3)
    assert (TIMEOUT_MS - IVL_MS) / 1e3 <= took < (IVL_MS + TIMEOUT_MS) / 1e3 + SLACK_S


def test_an_idle_ue_keeps_its_session_past_the_heartbeat_timeout(edge, holder) -> None:
    time.sleep(4 * TIMEOUT_MS / 1e3)  # the holder sleeps: only its keepalive thread speaks for it
    assert not re.search(holder[1], edge[1].read_text(errors="replace"))


def test_the_run_stops_at_once_when_its_edge_dies(tmp_path: Path) -> None:
    ue = Child("ue", ["timeit", "-n", "1", "-r", "1", "import time; time.sleep(60)"], tmp_path / "ue.log")
    edge = Child("edge", ["json.tool", str(tmp_path / "missing.json")], tmp_path / "edge.log")  # exits at once
    try:
        t0 = time.monotonic()
        with pytest.raises(ChildError, match=r"the edge exited \(code 2\) while the UEs ran.*edge\.log"):
            wait_with_edge([ue], edge)
        assert time.monotonic() - t0 < 10
        assert ue.proc.poll() is None  # the caller stops the UEs (testbed.run's finally)
    finally:
        ue.stop()
        edge.stop()
    done = Child("ue", ["json.tool", "--help"], tmp_path / "ue2.log")
    wait_with_edge([done], None)  # no edge to watch (remote): returns when the UEs are done
    assert done.wait() == 0
    done.stop()
