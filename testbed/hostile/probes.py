"""Hostile-peer probes against a live edge, on loopback: what a careless or hostile laptop on a shared lab network
could send.  Each probe runs until ``stop`` is set (or its own bound) and returns counts of what it did and got.

Used by tests/testbed/hostile/test_hostile.py (one fault test per probe) and scripts/bench/hostile.py (edge RSS and a
good UE's round p95 under each probe, before and after the hardening of issue 27).
"""
from __future__ import annotations

import json
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import zmq

from protocols.wire import MsgType, encode, make
from testbed.live.common.auth import client_curve
from testbed.live.common.liveness import Heartbeat

RECV_MS = 2000  # a probe waits this long at most for a reply it reads
BURST_MSGS = 200  # PINGs each takeover connection sends at once (past the edge's RCVHWM)
ENDLESS_BYTES = 512 * 2**20  # the endless multipart stops sending after this much (the memory it costs stays)


@dataclass(frozen=True)
class Target:
    """The edge a probe attacks."""

    endpoint: str  # tcp://127.0.0.1:PORT
    keys: Path | None = None  # the edge's --auth key dir (a probe then holds a listed key), None: no CURVE
    log: Path | None = None  # the edge's log (the identity takeover reads a UE's identity from it)
    vocab_size: int = 64  # token ids the probe's prompts use stay below this


def dealer(ctx: zmq.Context, t: Target, identity: bytes | None = None, keyed: bool = True,
           heartbeat: bool = False) -> zmq.Socket:
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, RECV_MS)
    sock.setsockopt(zmq.SNDTIMEO, RECV_MS)
    if identity is not None:
        sock.setsockopt(zmq.IDENTITY, identity)
    if heartbeat:
        Heartbeat().apply(sock)
    if keyed and t.keys is not None:
        client_curve(sock, t.keys)
    sock.connect(t.endpoint)
    return sock


def ping(sid: str = "probe", seq: int = 0, **header) -> list[bytes]:
    return encode(make(MsgType.PING, sid, None, seq=seq, t_send=0.0, **header))


def _probe(fn: Callable) -> Callable:
    """Run ``fn(ctx, t, stop, stats)`` with a fresh context destroyed afterwards; returns the stats."""
    def run(t: Target, stop: threading.Event) -> dict:
        ctx, stats = zmq.Context(), {}
        try:
            fn(ctx, t, stop, stats)
        finally:
            ctx.destroy(linger=0)
        return stats
    run.__name__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


@_probe
def takeover(ctx, t: Target, stop, stats) -> None:
    """Connect again and again with one identity while the previous connection is still up, each connection sending a
    burst of PINGs past the edge's receive high-water mark (CURVE and heartbeats on when the edge has --auth): the
    pattern that made libzmq 4.3.5 abort (``!_io_error``, stream_engine_base.cpp:310)."""
    socks, n = [], 0
    while not stop.is_set():
        s = dealer(ctx, t, b"ue0-0badf00d", heartbeat=True)
        for i in range(BURST_MSGS):
            try:
                s.send_multipart(ping(seq=i), flags=zmq.NOBLOCK)
            except zmq.Again:
                break
        socks.append(s)
        if len(socks) > 2:
            socks.pop(0).close(0)
        n += 1
        time.sleep(0.05)
    stats["takeovers"] = n


OPENED = re.compile(r"open session (\S+) from peer ([0-9a-f]+)")


@_probe
def identity_takeover(ctx, t: Target, stop, stats) -> None:
    """Read a UE's identity and session id from the edge's log and send its session's DRAFT and CLOSE with that
    identity (no token: what a peer without it can do)."""
    seen, answers = set(), {}
    while not stop.is_set():
        for sid, peer in OPENED.findall(t.log.read_text(errors="replace")) if t.log else ():
            if (sid, peer) in seen or sid.startswith("probe"):
                continue
            seen.add((sid, peer))
            s = dealer(ctx, t, bytes.fromhex(peer))
            draft = make(MsgType.DRAFT, sid, {"tokens": np.array([1, 2], np.int32)}, round=0, t_draft_s=0.0)
            for frames in (encode(draft), encode(make(MsgType.CLOSE, sid))):
                s.send_multipart(frames, flags=zmq.NOBLOCK)
            for _ in range(2):
                try:
                    frames = s.recv_multipart()
                except zmq.Again:
                    answers["none"] = answers.get("none", 0) + 1
                    break
                code = frames[0][:1]
                answers[code.hex()] = answers.get(code.hex(), 0) + 1
            s.close(0)
        time.sleep(0.2)
    stats.update(victims=len(seen), answers=answers)


def zmtp_greeting(mechanism: bytes = b"NULL") -> bytes:
    """A ZMTP 3.0 greeting (signature, version 3.0, mechanism, as-client)."""
    return b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + mechanism.ljust(20, b"\0") + b"\0" + b"\0" * 31


def zmtp_ready() -> bytes:
    """NULL mechanism's READY command declaring a DEALER."""
    body = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
    return b"\x04" + bytes([len(body)]) + body


def raw_connect(t: Target, timeout_s: float = 5.0) -> socket.socket:
    host, port = t.endpoint.removeprefix("tcp://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout_s)


@_probe
def endless_multipart(ctx, t: Target, stop, stats) -> None:
    """Raw ZMTP (NULL mechanism): one multipart message of 64 KiB parts that never ends (sent up to ENDLESS_BYTES,
    then held open: an edge without --auth buffers all of it)."""
    part = b"\x03" + struct.pack(">Q", 65536) + b"\0" * 65536  # MORE | LONG, 64 KiB
    sent, refused = 0, False
    s = raw_connect(t)
    try:
        s.sendall(zmtp_greeting() + zmtp_ready())
        while not stop.is_set() and sent < ENDLESS_BYTES:
            s.sendall(part)
            sent += len(part)
        s.settimeout(0.2)
        while not stop.is_set() and not refused:  # held open until the edge hangs up or the probe stops
            try:
                refused = not s.recv(4096)  # b"": the edge closed it
            except TimeoutError:
                continue
    except OSError:  # the edge closed the connection
        refused = True
    finally:
        s.close()
    stats.update(bytes_sent=sent, refused=refused)


@_probe
def parts_bomb(ctx, t: Target, stop, stats) -> None:
    """Two messages of 250,000 zero-length frames each (2 bytes each on the wire)."""
    s, n = dealer(ctx, t), 0
    while not stop.is_set() and n < 2:
        s.send(bytes([MsgType.PING]), zmq.SNDMORE)
        for _ in range(250_000):
            s.send(b"", zmq.SNDMORE)
        s.send(b"")
        n += 1
    replies, deadline = 0, time.monotonic() + 30.0  # the edge reads 250,000 parts per bomb: slow on a loaded host
    while replies < n and time.monotonic() < deadline:
        try:
            s.recv_multipart()
            replies += 1
        except zmq.Again:
            continue
    stats.update(bombs=n, replies=replies)


@_probe
def pong_pinning(ctx, t: Target, stop, stats) -> None:
    """20 peers each send 64 PINGs asking for the largest PONG the edge grants, and never read."""
    socks = [dealer(ctx, t) for _ in range(20)]
    asked = 2**20
    probe = dealer(ctx, t)
    probe.send_multipart(ping(reply_bytes=asked))
    if probe.recv_multipart()[0][:1] == bytes([MsgType.ERROR]):  # too large here: ask for what it allows
        asked = 2**18
    for s in socks:
        for i in range(64):
            s.send_multipart(ping(seq=i, reply_bytes=asked), flags=zmq.NOBLOCK)
    stop.wait()
    stats.update(peers=len(socks), reply_bytes=asked, replies_read=0)


@_probe
def session_hog(ctx, t: Target, stop, stats) -> None:
    """One identity opens 300 sessions, then re-OPENs them every second and never drafts."""
    s = dealer(ctx, t, b"hog")
    counts: dict[str, int] = {}
    prompt = np.array([1, 5, 7], np.int32)
    rounds, t0 = 0, time.monotonic()
    while not stop.is_set():
        for i in range(300):
            s.send_multipart(encode(make(MsgType.OPEN, f"hog-{i}", {"prompt": prompt}, protocol="greedy",
                                         draft_len=4, max_new_tokens=8)))
        for _ in range(300):
            try:
                kind = MsgType(s.recv_multipart()[0][0]).name
            except zmq.Again:  # the rest were dropped (the edge's send queue to this peer was full)
                break
            counts[kind] = counts.get(kind, 0) + 1
        rounds += 1
        stop.wait(1.0)
    stats.update(rounds=rounds, replies=counts, seconds=time.monotonic() - t0)


@_probe
def reference_flood(ctx, t: Target, stop, stats) -> None:
    """40 peers each ask for REFERENCEs of fresh prompts (32 tokens each), one after another."""
    rng = np.random.default_rng(0)
    socks = [dealer(ctx, t) for _ in range(40)]
    got: dict[str, int] = {}
    poller = zmq.Poller()

    def ask(s):
        prompt = rng.integers(1, t.vocab_size, 8).astype(np.int32)
        s.send_multipart(encode(make(MsgType.REFERENCE, "probe-ref", {"prompt": prompt}, max_new_tokens=32)))
    for s in socks:
        ask(s)
        poller.register(s, zmq.POLLIN)
    while not stop.is_set():
        for s, _ in poller.poll(100):
            kind = MsgType(s.recv_multipart()[0][0]).name
            got[kind] = got.get(kind, 0) + 1
            ask(s)
    stats["replies"] = got


@_probe
def slowloris(ctx, t: Target, stop, stats) -> None:
    """1,100 TCP connections that never finish their handshake (held until stopped)."""
    held = []
    try:
        for _ in range(1100):
            held.append(raw_connect(t))
    except OSError as e:
        stats["connect_error"] = str(e)
    stats["connections"] = len(held)
    stop.wait()
    for s in held:
        s.close()


@_probe
def log_flood(ctx, t: Target, stop, stats) -> None:
    """Failed handshakes in a loop: a NULL-mechanism ZMTP greeting against a CURVE edge (each one used to log a
    WARNING)."""
    n = 0
    while not stop.is_set():
        try:
            s = raw_connect(t)
            s.sendall(zmtp_greeting() + zmtp_ready())
            s.recv(64)
            s.close()
        except OSError:
            pass
        n += 1
        time.sleep(0.01)
    stats["attempts"] = n


PROBES: dict[str, Callable[[Target, threading.Event], dict]] = {
    f.__name__: f for f in (takeover, identity_takeover, endless_multipart, parts_bomb, pong_pinning, session_hog,
                            reference_flood, slowloris, log_flood)}
AUTH_PROBES = ("takeover", "endless_multipart", "log_flood")  # run against an edge with --auth


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, bytes (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class PeakRSS:
    """Sample a process's RSS every ``every_s`` in a thread; ``peak`` is the largest seen."""

    def __init__(self, pid: int, every_s: float = 0.05):
        self.pid, self.every_s, self.peak = pid, every_s, rss_bytes(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.peak = max(self.peak, rss_bytes(self.pid))
            except (OSError, ValueError):
                return

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


def good_ue_cmd(endpoint: str, drafter: Path, out: Path, keys: Path | None = None, prompts: int = 2,
                max_new_tokens: int = 16) -> list[str]:
    """A well-behaved UE run (greedy, so its output must match the target's: matches_target 1.0)."""
    cmd = [sys.executable, "-m", "testbed.ue", "--connect", endpoint, "--drafter", str(drafter), "--out", str(out),
           "--prompts", str(prompts), "--protocol", "greedy", "--draft-len", "4", "--max-new-tokens",
           str(max_new_tokens), "--probe-bytes", "8192", "--recv-timeout-s", "20"]
    return cmd + (["--auth", str(keys)] if keys else [])


@dataclass
class Outcome:
    """A good UE's run beside a probe, and the edge under it."""

    rc: int  # the UE's exit status
    matches_target: float | None  # from its summary.json (None: no summary)
    round_p95_s: float | None  # 95th percentile of its rounds' t_round_s
    rss_before: int  # the edge's RSS before the probe, bytes
    rss_peak: int  # its largest RSS while the probe and the UE ran, bytes
    edge_alive: bool  # the edge process still runs afterwards
    probe: dict  # what the probe did and got
    ue_log: str  # the UE's stderr tail


def run_beside(probe: str | None, t: Target, edge_pid: int, cmd: list[str], out: Path, warm_s: float = 1.0,
               timeout_s: float = 240.0, alive: Callable[[], bool] | None = None) -> Outcome:
    """Start ``probe`` (None: none), let it work ``warm_s``, run the good UE ``cmd`` to its end, stop the probe."""
    stop, result = threading.Event(), {}
    thread = threading.Thread(target=lambda: result.update(PROBES[probe](t, stop)), daemon=True) if probe else None
    before = rss_bytes(edge_pid)
    with PeakRSS(edge_pid) as peak:
        if thread:
            thread.start()
            time.sleep(warm_s)
        out.parent.mkdir(parents=True, exist_ok=True)
        err = out.parent / f"{out.name}.ue.log"
        with err.open("w") as f:
            try:
                rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=f, timeout=timeout_s).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        stop.set()
        if thread:
            thread.join(30)
    summary = out / "summary.json"
    s = json.loads(summary.read_text()) if summary.exists() else {}
    rounds = out / "rounds.csv"
    p95 = float(pd.read_csv(rounds)["t_round_s"].quantile(0.95)) if rounds.exists() else None
    return Outcome(rc, s.get("matches_target"), p95, before, peak.peak,
                   alive() if alive else Path(f"/proc/{edge_pid}").exists(), result, err.read_text()[-1500:])
