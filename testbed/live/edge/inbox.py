"""The batching edge's receiver thread: owns the ROUTER socket, stamps each message when it arrives, sends replies.

A verification batch blocks the serving loop for tens of milliseconds.  Without this thread a DRAFT that
arrives meanwhile waits in ZeroMQ's buffer, unseen: the edge would date its arrival (and so its deadline,
WISP eq. 12) only when the batch is over, and count that wait as link time instead of queue time.  Here a
thread receives while the engine computes (torch releases the GIL in its kernels; the switch interval is
lowered so that the thread gets the GIL within ~1 ms when Python code holds it) and hands ``(arrival,
peer, frames)`` to the loop through a queue.  Replies go back through an inproc PAIR socket, because a
ZeroMQ socket must be used by one thread only.  The single-session path does not use it: the extra hop
costs a thread wake-up per reply.  ``Direct`` gives that path the same ``get``/``send`` interface: the serving
loop reads the socket itself and dates a message when it reads it, so that the edge time it reports spans from
the socket (decoding included) and the UE's link time starts and ends at its own socket (testbed/live/ue/ue.py).
The queue is bounded in messages and in bytes, per peer and in all: an arrival that finds no room is answered at
once by ``refuse`` (the edge's ERROR ``busy``) and dropped, so that a flood cannot grow the edge's memory.  Both
read one part at a time and drop a message larger than its type allows (testbed/live/edge/intake.py); replies are sent
without blocking and dropped when the peer's queue is full (a peer that never reads cannot stall the edge).
"""
from __future__ import annotations

import itertools
import queue
import sys
import threading
import time
from collections.abc import Callable

import zmq

from protocols.wire import Limits
from testbed.live.common.defaults import MAX_QUEUE_MSGS, PEER_QUEUE_BYTES, TOTAL_QUEUE_BYTES
from testbed.live.edge.intake import Budget, Cap, caps, message_bytes, recv_bounded, too_large

SWITCH_INTERVAL_S = 0.001  # Python's GIL switch interval while an Inbox runs (default 5 ms)
POLL_MS = 100  # the thread checks its stop flag at least this often
_ids = itertools.count()

Arrival = tuple[float | None, bytes, list]  # (perf_counter at receipt or None: when handled, peer, frames)
Refuse = Callable[[bytes, list], list]  # (peer, frames) -> reply frames (without the peer) to a message not queued


class Direct:
    """The serving loop reads the ROUTER socket itself (no thread; stamped when read): the single-session path."""

    def __init__(self, sock: zmq.Socket, caps: dict[int, Cap] | None = None):
        self.sock, self.caps, self._poller = sock, caps or default_caps(), zmq.Poller()
        self._poller.register(sock, zmq.POLLIN)
        self.dropped = 0  # replies dropped because the peer's queue was full, or messages over their caps

    def get(self, timeout_s: float, most: int) -> list[Arrival]:
        """Messages waiting on the socket (waiting up to timeout_s for the first), at most ``most``."""
        if not self._poller.poll(int(timeout_s * 1000)):
            return []
        items, reads = [], 0
        while len(items) < most and reads < 4 * most:
            try:
                peer, frames, why = recv_bounded(self.sock, self.caps, zmq.NOBLOCK if reads else 0)
            except zmq.Again:
                break
            reads += 1
            if why is None:
                items.append((time.perf_counter(), peer, frames))
            else:
                self.dropped += 1
                self.send([peer, *too_large(why)])
        return items

    def send(self, frames: list) -> None:
        self.dropped += not send_or_drop(self.sock, frames)


class Inbox:
    """Receive on ``sock`` in a thread; ``get`` the stamped messages, ``send`` replies (from one other thread)."""

    def __init__(self, ctx: zmq.Context, sock: zmq.Socket, refuse: Refuse, max_queue: int = MAX_QUEUE_MSGS,
                 caps: dict[int, Cap] | None = None, peer_bytes: int = PEER_QUEUE_BYTES,
                 total_bytes: int = TOTAL_QUEUE_BYTES):
        self.sock, self._q, self._refuse = sock, queue.Queue(maxsize=max_queue), refuse
        self.caps = caps or default_caps()
        self.budget, self._lock = Budget(peer_bytes, total_bytes), threading.Lock()  # bytes queued, per peer
        self.refused = 0  # arrivals answered by refuse because the queue (its messages or bytes) was full
        self.dropped = 0  # replies dropped because the peer's queue was full, or messages over their caps
        addr = f"inproc://edge-replies-{next(_ids)}"
        self._pull = ctx.socket(zmq.PAIR)
        self._pull.bind(addr)
        self._push = ctx.socket(zmq.PAIR)
        self._push.connect(addr)
        self._stop = threading.Event()
        self._error: BaseException | None = None  # what ended the thread, re-raised by get()
        self._switch = sys.getswitchinterval()
        self._thread = threading.Thread(target=self._run, name="edge-inbox", daemon=True)

    def __enter__(self) -> Inbox:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        sys.setswitchinterval(self._switch)
        self._push.close(0)
        self._pull.close(0)

    def get(self, timeout_s: float, most: int) -> list[Arrival]:
        """Messages received so far (waiting up to timeout_s for the first), at most ``most``.

        Raises RuntimeError if the receiver thread died (the edge would otherwise wait for messages forever)."""
        if self._error is not None:
            raise RuntimeError(f"the edge's receiver thread failed: {self._error!r}") from self._error
        items = []
        try:
            items.append(self._q.get(timeout=timeout_s) if timeout_s > 0 else self._q.get_nowait())
            while len(items) < most:
                items.append(self._q.get_nowait())
        except queue.Empty:
            pass
        with self._lock:
            for _, peer, frames in items:
                self.budget.give(peer, message_bytes(frames))
        return items

    def send(self, frames: list) -> None:
        """Queue one reply (peer identity first) for the thread to send."""
        self._push.send_multipart(frames)

    def _run(self) -> None:
        try:
            self._serve()
        except BaseException as e:  # noqa: BLE001 - handed to the serving loop, which stops the edge
            self._error = e

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self._pull, zmq.POLLIN)
        while not self._stop.is_set():
            for s, _ in poller.poll(POLL_MS):
                if s is self.sock:
                    self._receive()
                else:
                    self.dropped += not send_or_drop(self.sock, self._pull.recv_multipart(copy=False))

    def _receive(self) -> None:
        """Queue one arrival, or answer it with ``refuse`` when the queue has no room for it (messages or bytes)."""
        peer, frames, why = recv_bounded(self.sock, self.caps)
        if why is not None:
            self.dropped += 1
            self.dropped += not send_or_drop(self.sock, [peer, *too_large(why)])
            return
        nbytes = message_bytes(frames)
        with self._lock:
            room = self.budget.take(peer, nbytes)
        try:
            if not room:
                raise queue.Full
            self._q.put_nowait((time.perf_counter(), peer, frames))
        except queue.Full:
            if room:
                with self._lock:
                    self.budget.give(peer, nbytes)
            self.refused += 1
            self.dropped += not send_or_drop(self.sock, [peer, *self._refuse(peer, frames)])


def default_caps() -> dict[int, Cap]:
    """Caps for the wire's default limits (any vocabulary): what a socket without an edge's limits accepts."""
    return caps(Limits(vocab_size=2**31 - 1))


def send_or_drop(sock: zmq.Socket, frames: list) -> bool:
    """Send without blocking; False when the peer's queue is full (or it is gone) and the reply was dropped."""
    try:
        sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
        return True
    except zmq.Again:
        return False
