"""One relayed TCP connection: per direction a reader admits chunks to a Link and a sender delivers them on time.

Threads per connection: with links (emulated), a reader and a sender per direction; without (ideal
link), one thread per direction that forwards each chunk at once (the fast path).  End of stream is a
zero-byte chunk that travels the link like data and becomes ``shutdown(SHUT_WR)`` at the far end
(half-close).  A socket error in either direction aborts the whole connection; ``abort()`` is also
how the emulator stops it.  Sockets are closed by the last thread of the connection to finish.
Each chunk read (at most CHUNK_BYTES) is delivered whole when its last bit arrives, so the last byte
of a message arrives on time while its first bytes may arrive later than on a real link.
"""
from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Callable

from channel.linkmodel import Direction, Link

CHUNK_BYTES = 65536  # largest read from a socket, bytes
SPIN_S = 0.0002  # sleep_until: the last this many seconds are spent yield-spinning, not sleeping
_ABORT = object()  # queue item: stop sending, the connection is broken


def sleep_until(deadline_s: float, stop: threading.Event) -> bool:
    """Wait until time.perf_counter() >= deadline_s; False if stop was set first."""
    while True:
        left_s = deadline_s - time.perf_counter()
        if left_s <= 0:
            return True
        if left_s > SPIN_S:
            if stop.wait(left_s - SPIN_S):
                return False
        else:
            time.sleep(0)  # yield the GIL while spinning
        if stop.is_set():
            return False


class Connection:
    """A client socket relayed to a server socket through an up and a down Link (None = fast path)."""

    def __init__(
        self,
        name: str,
        client: socket.socket,
        server: socket.socket,
        links: dict[Direction, Link] | None,
        on_bytes: Callable[[Direction, int], None],
        on_closed: Callable[[Connection], None],
    ):
        self.name = name
        self.client, self.server = client, server
        self.links = links
        self.on_bytes = on_bytes
        self.on_closed = on_closed
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self._live = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        ends: dict[Direction, tuple[socket.socket, socket.socket]] = {
            "up": (self.client, self.server), "down": (self.server, self.client)}
        for d, (src, dst) in ends.items():
            if self.links is None:
                self._spawn(f"{d}-fwd", self._forward, d, src, dst)
            else:
                q: queue.SimpleQueue = queue.SimpleQueue()
                self._spawn(f"{d}-read", self._read, d, src, q)
                self._spawn(f"{d}-send", self._send, d, dst, q)
        for t in self.threads:
            t.start()

    def abort(self) -> None:
        """Break the connection: wake every thread; sockets close when the last one finishes."""
        self.stop.set()
        for s in (self.client, self.server):
            shutdown_quietly(s, socket.SHUT_RDWR)

    def join(self, timeout_s: float | None = None) -> None:
        for t in self.threads:
            t.join(timeout_s)

    def _spawn(self, role: str, fn: Callable[..., None], *args: object) -> None:
        self._live += 1
        name = f"{self.name}-{role}"
        self.threads.append(threading.Thread(target=self._run, args=(fn, *args), name=name, daemon=True))

    def _run(self, fn: Callable[..., None], *args: object) -> None:
        try:
            fn(*args)
        except OSError:
            self.abort()
        finally:
            with self._lock:
                self._live -= 1
                last = self._live == 0
            if last:
                self.client.close()
                self.server.close()
                self.on_closed(self)

    def _forward(self, d: Direction, src: socket.socket, dst: socket.socket) -> None:
        """Fast path: forward each chunk as soon as it is read."""
        while data := src.recv(CHUNK_BYTES):
            self.on_bytes(d, len(data))  # counted before sending, so a reply is never seen uncounted
            dst.sendall(data)
        if not self.stop.is_set():
            dst.shutdown(socket.SHUT_WR)

    def _read(self, d: Direction, src: socket.socket, q: queue.SimpleQueue) -> None:
        """Admit every chunk (and the zero-byte end of stream) to the link as it arrives."""
        try:
            while True:
                data = src.recv(CHUNK_BYTES)
                slot = self.links[d].admit(time.perf_counter(), len(data))
                q.put((slot.deliver_at_s, data))
                if not data:
                    return
        except OSError:
            q.put((0.0, _ABORT))
            raise

    def _send(self, d: Direction, dst: socket.socket, q: queue.SimpleQueue) -> None:
        """Deliver queued chunks at their delivery times, in order."""
        while True:
            deliver_at_s, data = q.get()
            if data is _ABORT or not sleep_until(deliver_at_s, self.stop):
                self.abort()
                return
            if not data:
                dst.shutdown(socket.SHUT_WR)
                return
            self.on_bytes(d, len(data))  # counted before sending, so a reply is never seen uncounted
            dst.sendall(data)


def shutdown_quietly(s: socket.socket, how: int) -> None:
    try:
        s.shutdown(how)
    except OSError:
        pass  # already shut down or closed
