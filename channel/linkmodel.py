"""Pure timing model of one direction of the emulated link: FIFO serialization, retransmissions, propagation.

A chunk of ``nbytes`` that arrives at ``now_s`` starts serializing at ``start = max(now_s, link_free_at_s)``
(FIFO: the link carries one chunk at a time).  It is cut into ``mtu_bytes`` segments (the last one
shorter); each transmission of a segment is lost with probability ``per`` and repeated until one gets
through, and every transmission costs one serialization of that segment at ``rate_mbps``.  The number of
transmissions per segment is geometric with mean ``1 / (1 - per)``, so the expected serialization time
is ``S / (R (1 - PER))`` (SPEC "Communication time") whatever the chunking.  Header bytes are not counted.

The chunk is delivered one propagation delay after its last bit leaves:
``deliver = max(serialize_done + max(0, delay_ms + N(0, jitter_ms^2) - overhead_ms) / 1e3, prev_deliver_s)``.
``overhead_ms`` (default 0) is the hosts' own one-way cost (sockets, wake-ups, the relay's hops): the
emulator takes it out of the propagation delay so that what the endpoints measure matches the model;
it can remove at most the whole delay, never serialization time.
Jitter is Gaussian with standard deviation ``jitter_ms``, clipped at zero delay, and a chunk is never
delivered before the one ahead of it on the same link, so byte order is preserved (this clipping
makes the mean delay slightly larger than ``delay_ms`` when jitter is large against the chunk spacing).

Outages (``channel/outage.py``, on the link's clock): ``Link`` pauses serialization for every outage it
overlaps, and a chunk whose delivery falls in an outage is delivered when the outage ends
(``past_outages``); its bytes are held, never dropped.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from channel.csi import CSI
from channel.outage import Outages

MTU_BYTES = 1500  # default segment size, bytes
Direction = Literal["up", "down"]  # up = client (UE) -> server (edge), down = server -> client


@dataclass(frozen=True)
class DirParams:
    """Parameters of one link direction, as in force when a chunk starts serializing."""

    rate_mbps: float  # serialization rate, Mbit/s; inf = no serialization delay
    per: float = 0.0  # loss probability of one segment transmission, in [0, 1)
    delay_ms: float = 0.0  # one-way propagation delay, ms (rtt_ms / 2)
    jitter_ms: float = 0.0  # standard deviation of the Gaussian jitter on delay_ms, ms
    mtu_bytes: int = MTU_BYTES  # segment size for losses and retransmissions, bytes
    overhead_ms: float = 0.0  # hosts' own one-way cost, taken out of delay_ms (never below zero delay), ms

    @property
    def is_ideal(self) -> bool:
        return math.isinf(self.rate_mbps) and self.per == 0 and self.delay_ms == 0 and self.jitter_ms == 0


def dir_params(csi: CSI, direction: Direction, jitter_ms: float = 0.0, mtu_bytes: int = MTU_BYTES,
               overhead_ms: float = 0.0) -> DirParams:
    """The parameters of one direction of a CSI; each direction gets half the RTT."""
    if direction == "up":
        return DirParams(csi.rate_up_mbps, csi.per_up, csi.rtt_ms / 2, jitter_ms, mtu_bytes, overhead_ms)
    return DirParams(csi.rate_down_mbps, csi.per_down, csi.rtt_ms / 2, jitter_ms, mtu_bytes, overhead_ms)


class Slot(NamedTuple):
    """When one chunk leaves and reaches the far end."""

    serialize_done_s: float  # the last bit has left; the link is free again
    deliver_at_s: float  # the chunk is handed to the receiver
    n_tx: int  # segment transmissions, retransmissions included


def transmissions(n_segments: int, per: float, rng: np.random.Generator) -> int:
    """Total transmissions of n_segments segments, each repeated until one try is not lost."""
    if n_segments == 0 or per == 0:
        return n_segments
    return int(rng.geometric(1.0 - per, size=n_segments).sum())


def air_bytes(nbytes: int, per: float, mtu_bytes: int, rng: np.random.Generator) -> tuple[int, int]:
    """Bytes serialized to carry nbytes (retransmissions included) and the number of transmissions."""
    n_full, rest = divmod(nbytes, mtu_bytes)
    tx_full = transmissions(n_full, per, rng)
    tx_rest = transmissions(1 if rest else 0, per, rng)
    return tx_full * mtu_bytes + tx_rest * rest, tx_full + tx_rest


def schedule(
    now_s: float,
    nbytes: int,
    p: DirParams,
    link_free_at_s: float,
    rng: np.random.Generator,
    prev_deliver_s: float = -math.inf,
) -> Slot:
    """Timing of one chunk of nbytes arriving at now_s on a link busy until link_free_at_s (see module doc)."""
    start_s = max(now_s, link_free_at_s)
    sent_bytes, n_tx = air_bytes(nbytes, p.per, p.mtu_bytes, rng)
    done_s = start_s + sent_bytes * 8 / (p.rate_mbps * 1e6)
    delay_ms = p.delay_ms + (rng.normal(0.0, p.jitter_ms) if p.jitter_ms > 0 else 0.0) - p.overhead_ms
    deliver_s = max(done_s + max(delay_ms, 0.0) / 1e3, prev_deliver_s)
    return Slot(done_s, deliver_s, n_tx)


def past_outages(slot: Slot, start_s: float, outages: Outages) -> Slot:
    """A slot scheduled from start_s (on the outages' clock) with serialization paused during outages and a
    delivery that falls in one moved to its end; start_s must be a time the link is up."""
    done_s = outages.stretch(start_s, slot.serialize_done_s - start_s)
    deliver_s = outages.end_of(done_s + (slot.deliver_at_s - slot.serialize_done_s))
    return Slot(done_s, deliver_s, slot.n_tx)


class Link:
    """One direction of the link with its state (busy-until clock, last delivery); thread-safe.

    ``params_at(t)`` gives the parameters in force ``t`` seconds after ``t0_s``; it is called with
    the time the chunk starts serializing (after any outage in force then).  ``outages`` are on the same clock.
    """

    def __init__(self, params_at: Callable[[float], DirParams], rng: np.random.Generator, t0_s: float = 0.0,
                 outages: Outages = Outages()):
        self.params_at = params_at
        self.rng = rng
        self.t0_s = t0_s
        self.outages = outages
        self.free_at_s = -math.inf  # the link is busy until then
        self.last_deliver_s = -math.inf  # delivery time of the latest chunk
        self._lock = threading.Lock()

    def admit(self, now_s: float, nbytes: int) -> Slot:
        """Queue a chunk that arrived at now_s; returns its slot and advances the link state."""
        with self._lock:
            t_s = max(now_s, self.free_at_s)
            if self.outages:  # wait for the link to return (the outages' clock starts at t0_s)
                t_s = self.outages.end_of(t_s - self.t0_s) + self.t0_s
            slot = schedule(t_s, nbytes, self.params_at(t_s - self.t0_s), self.free_at_s, self.rng,
                            self.last_deliver_s)
            if self.outages:
                slot = self._past_outages(slot, t_s)
            self.free_at_s = slot.serialize_done_s
            self.last_deliver_s = slot.deliver_at_s
            return slot

    def _past_outages(self, slot: Slot, start_s: float) -> Slot:
        """past_outages on the link's clock (times from t0_s)."""
        t0 = self.t0_s
        rel = past_outages(Slot(slot.serialize_done_s - t0, slot.deliver_at_s - t0, slot.n_tx), start_s - t0,
                           self.outages)
        return Slot(rel.serialize_done_s + t0, rel.deliver_at_s + t0, rel.n_tx)
