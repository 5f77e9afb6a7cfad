"""What one peer may make the edge hold: per-type caps on a message's parts and bytes, read one part at a time,
per-peer byte budgets on queued arrivals and on PONG payloads, and the edge's frame bound.

ZeroMQ hands a multipart message over only once its last part has arrived: until then libzmq buffers the parts,
and neither ``ZMQ_MAXMSGSIZE`` (a bound per frame) nor the high-water mark (a count of whole messages) limits how
many there are.  A peer that sends a multipart message that never ends therefore grows the edge's memory inside
libzmq, where no option of the bundled version bounds it.  The answer is ``--auth``: under CURVE nothing a peer sends
is buffered before its key passed the handshake, so on a shared network only listed keys can do this at all.  What
the edge does bound: the frame size (``edge_limits``: the largest frame a legal message to this edge can have,
instead of 64 MiB), what it copies out of libzmq (``recv_bounded`` reads part by part and discards a message once it
has more parts or bytes than its type allows, before building any Python object from the rest), what waits for the
serving loop per peer (``Budget``), and how many PONG bytes a peer may ask for (``Bucket``).
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import zmq

from protocols.schema import DTYPES, SCHEMAS, Limits, MsgType
from protocols.wire import encode, error_message

HEADER_SLACK = 1  # the type byte before frame 0's msgpack header


def edge_limits(vocab_size: int, max_draft_len: int, max_probe_bytes: int, max_hidden_dim: int = 16384,
                max_prompt_len: int = 8192) -> Limits:
    """The edge's decode limits, with ``max_frame_bytes`` cut to the largest tensor frame any accepted message can
    carry (DRAFT probs [K, V] or hidden [K, d] in float32, a prompt in int64, a probe payload)."""
    base = Limits(vocab_size=vocab_size, max_draft_len=max_draft_len, max_positions=max_draft_len,
                  max_hidden_dim=max_hidden_dim, max_prompt_len=max_prompt_len, max_probe_bytes=max_probe_bytes)
    frame = max(4 * max_draft_len * max(vocab_size, max_hidden_dim), 8 * max_prompt_len, max_probe_bytes)
    return dataclasses.replace(base, max_frame_bytes=min(base.max_frame_bytes, frame))


@dataclass(frozen=True)
class Cap:
    """What one message of a type may be: parts (frame 0 and its tensor frames) and bytes in all."""

    parts: int
    nbytes: int


def caps(limits: Limits) -> dict[int, Cap]:
    """Per message type byte: its most parts (1 + its tensors) and bytes (header + each tensor at its largest
    declared shape and widest dtype, each at most a frame; a PING payload at most ``max_probe_bytes``)."""
    out = {}
    for mtype, schema in SCHEMAS.items():
        total = HEADER_SLACK + limits.max_header_bytes
        for t in schema.tensors.values():
            size = math.prod(getattr(limits, lim) for _, lim in t.dims) * max(DTYPES[d].itemsize for d in t.dtypes)
            if mtype == MsgType.PING:
                size = limits.max_probe_bytes
            total += min(size, limits.max_frame_bytes)
        out[int(mtype)] = Cap(1 + len(schema.tensors), total)
    return out


UNKNOWN_TYPE = Cap(8, HEADER_SLACK + 2**16)  # a message whose first byte names no type: decode answers bad_type


def recv_bounded(sock: zmq.Socket, limits_caps: dict[int, Cap], flags: int = 0) -> tuple[bytes, list, str | None]:
    """One message from a ROUTER, part by part: ``(peer, frames, why dropped)``.  Parts beyond its type's cap are
    read and discarded (libzmq frees them), so at most a cap's worth is ever held here; ``frames`` is then ``[]``."""
    peer = sock.recv(flags, copy=False).bytes
    frames, total, why = [], 0, None
    while sock.getsockopt(zmq.RCVMORE):
        part = sock.recv(copy=False)
        if why is not None:
            continue
        frames.append(part)
        total += len(part)
        first = frames[0].bytes[:1]
        cap = limits_caps.get(first[0], UNKNOWN_TYPE) if first else UNKNOWN_TYPE
        if len(frames) > cap.parts or total > cap.nbytes:
            kind = MsgType(first[0]).name if first and first[0] in limits_caps else "message of an unknown type"
            why = f"a {kind} may have {cap.parts} part(s) and {cap.nbytes} bytes; this one has more"
            frames = []
    return peer, frames, why


def message_bytes(frames: list) -> int:
    """Bytes a received message holds (its frames' lengths)."""
    return sum(len(f) for f in frames)


class Budget:
    """Bytes held per peer (arrivals queued for the serving loop), against a per-peer and a total cap."""

    def __init__(self, per_peer_bytes: int, total_bytes: int):
        self.per_peer, self.total_cap = per_peer_bytes, total_bytes
        self.held: dict[bytes, int] = {}
        self.total = 0

    def take(self, peer: bytes, nbytes: int) -> bool:
        """Hold ``nbytes`` more for ``peer`` if both caps allow it (True), else nothing (False)."""
        mine = self.held.get(peer, 0)
        if mine + nbytes > self.per_peer or self.total + nbytes > self.total_cap:
            return False
        self.held[peer], self.total = mine + nbytes, self.total + nbytes
        return True

    def give(self, peer: bytes, nbytes: int) -> None:
        """Release bytes taken for ``peer``."""
        left = self.held.get(peer, 0) - nbytes
        self.total -= nbytes
        if left > 0:
            self.held[peer] = left
        else:
            self.held.pop(peer, None)


class Bucket:
    """Per-key token bucket of bytes: ``burst`` at most, refilled at ``rate`` bytes/s (PONG payloads per peer)."""

    def __init__(self, rate_bytes_s: float, burst_bytes: float, clock=time.monotonic, max_keys: int = 4096):
        self.rate, self.burst, self.clock, self.max_keys = rate_bytes_s, burst_bytes, clock, max_keys
        self.level: dict[bytes, tuple[float, float]] = {}  # key -> (bytes left, when)

    def spend(self, key: bytes, nbytes: int) -> bool:
        """Take ``nbytes`` from ``key``'s bucket if it holds them (True), else take nothing (False)."""
        now = self.clock()
        left, t = self.level.get(key, (self.burst, now))
        left = min(self.burst, left + (now - t) * self.rate)
        ok = nbytes <= left
        if len(self.level) >= self.max_keys and key not in self.level:
            self.level = {k: v for k, v in self.level.items() if v[0] < self.burst}  # full buckets: forget
        self.level[key] = (left - nbytes if ok else left, now)
        return ok


def too_large(why: str) -> list[bytes]:
    """The ERROR sent for a message dropped by ``recv_bounded`` (its session is not read: "unknown")."""
    return encode(error_message("unknown", "too_large", why))
