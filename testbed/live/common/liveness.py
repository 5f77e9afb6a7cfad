"""Liveness: ZeroMQ heartbeats on both ends, and the edge's watch naming the peers whose connection ended.

Heartbeats: every ``ivl_ms`` a socket sends a ZMTP PING; a connection that brings nothing within ``timeout_ms`` of
one is closed (on both ends: the PING's TTL, the same ``timeout_ms``, tells the peer to do likewise).  Replies come
from ZeroMQ's I/O thread, so a busy edge or UE still answers them.

The edge's ROUTER has no portable per-peer disconnect notice (``ZMQ_ROUTER_NOTIFY`` is a draft API that the bundled
libzmq lacks), so ``PeerWatch`` reads the socket monitor: ``DISCONNECTED`` names the file descriptor of a connection
that ended (closed by the peer, a reset, or a heartbeat timeout), and every message tells the descriptor it came on
(``ZMQ_SRCFD``).  A peer whose last message came on a closed descriptor is gone.  A new connection that reuses the
descriptor before the event is read could be taken for the dead one; its sessions would then be refused as unknown
and the UE re-opens them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import zmq
from zmq.utils.monitor import recv_monitor_message

from testbed.live.common.auth import handshake_failure
from testbed.live.common.defaults import HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS

WATCHED = zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL \
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
log = logging.getLogger("testbed.serve")


@dataclass(frozen=True)
class Heartbeat:
    """ZMTP heartbeat settings of one socket (``ivl_ms`` 0: none)."""

    ivl_ms: int = HEARTBEAT_IVL_MS  # PING interval, ms
    timeout_ms: int = HEARTBEAT_TIMEOUT_MS  # close a connection silent this long after a PING, ms (also its TTL)

    def apply(self, sock: zmq.Socket) -> zmq.Socket:
        """Set ZMQ_HEARTBEAT_IVL, _TIMEOUT and _TTL on ``sock`` (before it binds or connects); returns it."""
        if self.ivl_ms < 0 or self.timeout_ms <= 0:
            raise ValueError(f"heartbeat interval must be >= 0 and timeout > 0 ms, "
                             f"got {self.ivl_ms}, {self.timeout_ms}")
        sock.setsockopt(zmq.HEARTBEAT_IVL, self.ivl_ms)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, self.timeout_ms)
        sock.setsockopt(zmq.HEARTBEAT_TTL, min(self.timeout_ms, 6_553_500))  # libzmq keeps TTL in deciseconds
        return sock


class PeerWatch:
    """The edge's record of which connection each peer uses, and which peers lost theirs (one thread uses it)."""

    def __init__(self, sock: zmq.Socket):
        self.sock = sock
        self.mon = sock.get_monitor_socket(WATCHED)
        self.fds: dict[bytes, int] = {}  # peer identity -> descriptor of the connection its last message came on

    def gone(self, arrivals: list[tuple]) -> list[bytes]:
        """The peers whose connection ended since the last call; then note where ``(t, peer, frames)`` came from."""
        dead = self._events()
        for _, peer, frames in arrivals:
            fd = source_fd(frames)
            if fd is not None:
                self.fds[peer] = fd
        return dead

    def _events(self) -> list[bytes]:
        dead = []
        while self.mon.poll(0):
            ev = recv_monitor_message(self.mon)
            if ev["event"] == zmq.EVENT_DISCONNECTED:
                fd = int(ev["value"])
                dead += [p for p, f in self.fds.items() if f == fd]
                self.fds = {p: f for p, f in self.fds.items() if f != fd}
            elif why := handshake_failure(int(ev["event"]), int(ev["value"])):
                log.warning("refused a connection to %s: %s", ev["endpoint"].decode(errors="replace"), why)
        return dead

    def close(self) -> None:
        self.sock.disable_monitor()
        self.mon.close(0)


def source_fd(frames: list) -> int | None:
    """The descriptor of the connection a received message came on (None for frames not read from a socket)."""
    first = frames[0] if frames else None
    if not isinstance(first, zmq.Frame):
        return None
    try:
        return int(first.get(zmq.SRCFD))
    except zmq.ZMQError:
        return None

