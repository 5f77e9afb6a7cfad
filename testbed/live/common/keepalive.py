"""Application-level keepalives: how the edge tells a frozen UE from one that is merely idle between messages.

The edge's ROUTER sends no ZMTP heartbeats (libzmq 4.3.5 aborts under a takeover flood when it does), so a UE that
is SIGSTOPped (its TCP connection stays up) gave no sign until ``--session-timeout-s``.  Now a UE that declares
``keepalive_ms`` in its OPEN sends, from a thread on a socket of its own (same CURVE key under ``--auth``), a small
PING carrying the session's token every ``keepalive_ms``.  The edge notes every message of a session and every
keepalive for it (``Liveness.heard``), and frees a session that declared keepalives and was silent longer than
``silence_s`` (the edge's ``--heartbeat-timeout-ms``, and at least three keepalive intervals).  A session that
declared none is freed as before (idle timeout, or its connection's end).  Time the edge itself stood still (a
SIGSTOP, a long pass) is not counted as the UEs' silence.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import zmq

from protocols.wire import Limits, MsgType, encode, make
from testbed.live.common.auth import secure_connect
from testbed.live.common.sockbounds import bound_socket

MISSED = 3  # a session is silent once it missed this many of its keepalives (and --heartbeat-timeout-ms passed)
STALL_S = 0.5  # a gap this long between two edge checks is the edge's own stall: not counted as silence, s


@dataclass
class Watch:
    """One session's liveness on the edge."""

    keepalive_s: float  # the interval the UE declared at OPEN, s
    heard_s: float  # monotonic time of the last message or keepalive for it, s


class Liveness:
    """The edge's record of when each keepalive-declaring session was last heard (thread-safe: the inbox thread
    notes keepalives it must refuse as busy)."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s  # the edge's --heartbeat-timeout-ms, in s
        self.watches: dict[str, Watch] = {}  # session token -> its watch
        self.last_check_s = time.monotonic()  # when silent() last ran (its gaps are the edge's own stalls)
        self._lock = threading.Lock()

    def expect(self, token: str, keepalive_ms: int | None) -> None:
        """Watch a newly opened session that declared keepalives every ``keepalive_ms`` (None or 0: not watched)."""
        if keepalive_ms:
            with self._lock:
                self.watches[token] = Watch(keepalive_ms / 1e3, time.monotonic())

    def heard(self, token: str | None) -> None:
        """A message or keepalive for ``token`` arrived (unknown tokens: nothing)."""
        with self._lock:
            if token in self.watches:
                self.watches[token].heard_s = time.monotonic()

    def forget(self, token: str) -> None:
        with self._lock:
            self.watches.pop(token, None)

    def silent(self, now_s: float | None = None) -> list[str]:
        """Tokens of the watched sessions silent past their bound (they stay watched until forgotten)."""
        now_s = time.monotonic() if now_s is None else now_s
        with self._lock:
            stalled, self.last_check_s = now_s - self.last_check_s, now_s
            if stalled > STALL_S:  # the edge itself did not run: its UEs' keepalives wait in the socket
                for w in self.watches.values():
                    w.heard_s += stalled
            return [t for t, w in self.watches.items() if now_s - w.heard_s > silence_s(self.timeout_s, w.keepalive_s)]


def silence_s(timeout_s: float, keepalive_s: float) -> float:
    """How long a session that keeps alive every ``keepalive_s`` may be silent before it is freed, s."""
    return max(timeout_s, MISSED * keepalive_s)


class Keepalive:
    """The UE's keepalive thread: every ``ivl_s`` a PING with each held session's token, on its own DEALER."""

    def __init__(self, ctx: zmq.Context, endpoint: str, name: str, limits: Limits, ivl_s: float,
                 auth: str | None = None):
        self.ctx, self.endpoint, self.name, self.limits = ctx, endpoint, name, limits
        self.ivl_s, self.auth = ivl_s, auth  # keepalive interval, s; CURVE key dir (None: none)
        self.held: dict[str, dict] = {}  # session id -> {"token": ...} (OPEN_OK's), the sessions kept alive
        self.sent = 0  # keepalives sent
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{name}-keepalive", daemon=True)
        self._thread.start()

    def hold(self, sid: str, token: dict) -> None:
        """Keep ``sid`` alive with ``token`` (its header dict), starting now."""
        self.held = {**self.held, sid: dict(token)}
        self._wake.set()

    def release(self, sid: str) -> None:
        self.held = {k: v for k, v in self.held.items() if k != sid}

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(5)

    def _run(self) -> None:
        sock = None
        try:
            while not self._stop.is_set():
                if self.held:
                    sock = sock or self._connect()
                    if sock is not None:
                        self._beat(sock)
                self._wake.wait(self.ivl_s)
                self._wake.clear()
        finally:
            if sock is not None:
                sock.close(0)

    def _connect(self) -> zmq.Socket | None:
        sock = bound_socket(self.ctx.socket(zmq.DEALER), self.limits)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 4)  # an unreachable edge: keepalives are dropped, not queued
        try:
            secure_connect(sock, self.endpoint, self.auth, min(self.ivl_s, 1.0))
        except Exception:  # noqa: BLE001 - a refused handshake: the main socket reports it; try again later
            return None
        return sock

    def _beat(self, sock: zmq.Socket) -> None:
        """One PING per held session (dropped when the socket's queue is full); replies read and discarded."""
        while sock.poll(0):
            sock.recv_multipart()
        for sid, token in self.held.items():
            try:
                sock.send_multipart(encode(make(MsgType.PING, sid, None, seq=0, t_send=time.time(), **token)),
                                    flags=zmq.NOBLOCK)
                self.sent += 1
            except zmq.Again:
                pass
