"""ZeroMQ bounds from the wire limits: no frame larger than decode accepts is buffered; per-peer queues are capped."""
from __future__ import annotations

import zmq

from protocols.wire import Limits

HWM_MSGS = 64  # default send/receive high-water mark per peer, messages (a UE has one request in flight at a time)


def bound_socket(sock: zmq.Socket, limits: Limits, hwm_msgs: int = HWM_MSGS) -> zmq.Socket:
    """Set MAXMSGSIZE (ZeroMQ checks it per frame: a peer sending a larger frame is disconnected before it is
    buffered) to the largest frame decode accepts, and the send/receive high-water marks; returns ``sock``."""
    sock.setsockopt(zmq.MAXMSGSIZE, max_frame(limits))
    sock.setsockopt(zmq.SNDHWM, hwm_msgs)
    sock.setsockopt(zmq.RCVHWM, hwm_msgs)
    return sock


def max_frame(limits: Limits) -> int:
    """The largest frame a legal message can have, bytes: a tensor frame, or frame 0 (type byte + header)."""
    return max(limits.max_frame_bytes, 1 + limits.max_header_bytes)
