"""Live CSI estimation on the UE (pure, transport-free): robust medians of RTT and rate samples, and probe sizes.

Samples come from what the link carries anyway and from probes sized to be measurable:

- RTT: each handshake PING's round trip, and each finished round's communication time less the serialization of
  its bytes at the current rate estimate, per exchange (``add_round``).
- Rate of one direction: a probe's time beyond a small exchange's (``base_rtt_ms``: the lower quartile of the RTT
  samples, host delays included), i.e. its serialization (``add_probe``), and a round whose bytes in that
  direction serialize long enough to be measured (``add_round``: the other direction and the base RTTs are taken
  out).  Which small exchange to subtract decides the bias on a loaded host: on the 2-core VM at load ~12
  (scripts/bench/csi.py, 20 Mbps / 20 ms) the smallest sample left the rate ~20% low, the median ~20% high, the
  lower quartile within a few percent.  Probes are sized (``probe_bytes``) to serialize for ``probe_target_ms`` at the
  current estimate, so that RTT jitter (a few ms on a loaded host) is small beside the time measured.

A rate sample whose serialization lasted less than ``min_serialization_ms`` says more about RTT noise than about
the rate: it is dropped, not floored (an 8 KiB probe on a 20 Mbit/s link lasts 3.3 ms; a floor of 10 us once made
that 6554 Mbit/s).  So is a rate outside RATE_BOUNDS_MBPS.  A rate is the median of its last ``window`` samples.
Host delays (scheduling on a loaded machine) only ever add to a measured time, so the RTT reported is the smallest
of its last ``window`` samples: the path's own RTT plus the least host delay seen.  PER is not observable by timing
alone; a lossy link shows up as a lower effective rate R(1-PER), which is what latency predictions need, so the
estimate reports per = 0.
"""
from __future__ import annotations

import math
import re
import shutil
import statistics
import subprocess
from collections import deque
from dataclasses import dataclass, field

from channel.csi import CSI

RATE_BOUNDS_MBPS = (0.01, 100_000.0)  # plausible rates; a sample outside is dropped, Mbit/s
RTT_BOUNDS_MS = (0.0, 60_000.0)  # plausible RTTs; a sample outside is dropped, ms
MIN_SAMPLES = 3  # a handshake probes until each quantity has this many samples (the first prompt's estimate)
PROBE_BYTES_BOUNDS = (4096, 2**20)  # probe payloads, bytes (the edge's PONG cap, max_probe_bytes, is 1 MiB)
DOMINANT = 4.0  # a round is a rate sample of one direction when that one's serialization is this many times the other's


@dataclass
class CSIEstimator:
    """Median-filtered RTT and effective up/down rates from handshakes, probes and rounds."""

    window: int = 9  # samples each median is taken over (the newest ones)
    min_serialization_ms: float = 10.0  # a rate sample serialized for less than this is dropped (host noise), ms
    probe_target_ms: float = 100.0  # probes are sized to serialize for about this long at the current estimate, ms
    first_probe_bytes: int = 32768  # probe payload before any rate estimate, bytes
    rtts_ms: deque = field(default_factory=deque)  # newest RTT samples, ms
    rates_mbps: dict = field(default_factory=lambda: {"up": deque(), "down": deque()})  # newest rate samples, Mbit/s
    dropped: dict = field(default_factory=lambda: {"up": 0, "down": 0})  # rate samples dropped, per direction

    @property
    def rtt_ms(self) -> float | None:
        """The smallest RTT sample in the window, ms; None before the first."""
        return min(self.rtts_ms) if self.rtts_ms else None

    @property
    def base_rtt_ms(self) -> float | None:
        """The lower quartile of the RTT samples (nearest rank), host delays included: the small exchange a probe's
        time is measured against, ms (None before one)."""
        got = sorted(self.rtts_ms)
        return got[(len(got) - 1) // 4] if got else None

    @property
    def rate_up_mbps(self) -> float | None:
        return self.rate_mbps("up")

    @property
    def rate_down_mbps(self) -> float | None:
        return self.rate_mbps("down")

    def rate_mbps(self, direction: str) -> float | None:
        """The median rate sample of one direction ("up" or "down"), None before the first."""
        got = self.rates_mbps[direction]
        return statistics.median(got) if got else None

    def samples(self, direction: str | None = None) -> int:
        """How many samples the estimate of RTT (direction None) or of one direction's rate holds."""
        return len(self.rtts_ms if direction is None else self.rates_mbps[direction])

    def add_rtt(self, rtt_s: float) -> None:
        """One round-trip time of a small message, s."""
        if RTT_BOUNDS_MS[0] <= rtt_s * 1e3 <= RTT_BOUNDS_MS[1]:
            _push(self.rtts_ms, rtt_s * 1e3, self.window)

    def add_serialization(self, direction: str, nbytes: int, serialization_s: float) -> bool:
        """One rate sample: nbytes serialized in serialization_s; False when dropped (too short or implausible)."""
        rate = nbytes * 8 / serialization_s / 1e6 if serialization_s > 0 else math.inf
        if serialization_s * 1e3 < self.min_serialization_ms or not RATE_BOUNDS_MBPS[0] <= rate <= RATE_BOUNDS_MBPS[1]:
            self.dropped[direction] += 1
            return False
        _push(self.rates_mbps[direction], rate, self.window)
        return True

    def add_probe(self, direction: str, nbytes: int, elapsed_s: float) -> bool:
        """A probe of ``nbytes`` (one direction) whose exchange took ``elapsed_s`` (a small exchange in it)."""
        return self.add_serialization(direction, nbytes, elapsed_s - (self.base_rtt_ms or 0.0) / 1e3)

    def add_round(self, t_comm_s: float, up_bytes: int, down_bytes: int, exchanges: int) -> None:
        """A finished round: a rate sample of a direction whose bytes dominate and serialize long enough at the
        current estimate, else an RTT sample (comm time less the serialization, per exchange)."""
        if self.rtt_ms is None or exchanges < 1:
            return
        ser = {d: _serialization_s(n, self.rate_mbps(d)) for d, n in (("up", up_bytes), ("down", down_bytes))}
        for d, other in (("up", "down"), ("down", "up")):
            if ser[d] * 1e3 >= self.min_serialization_ms and ser[d] >= DOMINANT * ser[other]:
                nbytes = up_bytes if d == "up" else down_bytes
                self.add_serialization(d, nbytes, t_comm_s - exchanges * self.base_rtt_ms / 1e3 - ser[other])
                return
        self.add_rtt(max(t_comm_s - ser["up"] - ser["down"], 0.0) / exchanges)

    def probe_bytes(self, direction: str) -> int:
        """The next probe's payload: ``probe_target_ms`` of serialization at the current estimate; before one, the
        first size, quadrupled per dropped sample (a fast link needs a bigger probe to be measured)."""
        rate = self.rate_mbps(direction)
        if rate:
            n = rate * 1e6 / 8 * self.probe_target_ms / 1e3
        else:
            n = self.first_probe_bytes * 4 ** self.dropped[direction]
        return int(min(max(n, PROBE_BYTES_BOUNDS[0]), PROBE_BYTES_BOUNDS[1]))

    def probes_wanted(self, direction: str | None = None) -> int:
        """Probes (direction None: RTT pings) a handshake sends now: at least one, and up to MIN_SAMPLES while the
        estimate has fewer (dropped rate samples count: a link too fast to measure is not probed on and on)."""
        done = self.samples(direction) + (self.dropped[direction] if direction else 0)
        return max(1, MIN_SAMPLES - done)

    def csi(self) -> CSI | None:
        """The current estimate, or None before the first RTT sample (an unmeasured rate: unlimited)."""
        if self.rtt_ms is None:
            return None
        return CSI(self.rate_up_mbps or math.inf, self.rate_down_mbps or math.inf, self.rtt_ms)


def _push(window: deque, value: float, size: int) -> None:
    window.append(value)
    while len(window) > size:
        window.popleft()


def _serialization_s(nbytes: int, rate_mbps: float | None) -> float:
    """nbytes at rate_mbps, s (0 for an unknown rate)."""
    return nbytes * 8 / (rate_mbps * 1e6) if rate_mbps else 0.0


def ewma(old: float | None, new: float, alpha: float) -> float:
    """Exponentially weighted moving average: ``new`` weighs ``alpha``; the first value (old None) is taken as is."""
    return new if old is None else old + alpha * (new - old)


def tcp_counters(text: str) -> tuple[int, int] | None:
    """(data segments sent, segments retransmitted) summed over the connections in ``ss -tin`` output; None when
    it lists none.  ``retrans:c/t`` appears only once a connection retransmitted (t: its total)."""
    sent = [int(m) for m in re.findall(r"\bdata_segs_out:(\d+)", text)]
    if not sent:
        return None
    return sum(sent), sum(int(m) for m in re.findall(r"\bretrans:\d+/(\d+)", text))


def retransmission_rate(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Retransmitted over sent data segments between two samples (a TCP path's loss estimate); None without both
    or without a segment sent."""
    if before is None or after is None or after[0] <= before[0]:
        return None
    return max(0, after[1] - before[1]) / (after[0] - before[0])


def sample_tcp(host: str, port: int) -> tuple[int, int] | None:
    """This host's TCP counters toward host:port from ``ss`` (iproute2); None where ss is missing or fails."""
    if shutil.which("ss") is None:
        return None
    try:
        res = subprocess.run(["ss", "-tinH", "dst", host, "dport", "=", f":{port}"], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tcp_counters(res.stdout) if res.returncode == 0 else None
