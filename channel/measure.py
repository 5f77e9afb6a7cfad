"""Live CSI estimation on the UE: handshake RTT and timed probe payloads, smoothed (pure, transport-free)."""
from __future__ import annotations

import math
import re
import shutil
import subprocess
from dataclasses import dataclass

from channel.csi import CSI


@dataclass
class CSIEstimator:
    """Exponentially smoothed RTT and effective up/down rates from handshakes and probes.

    PER is not observable by timing alone; a lossy link shows up as a lower effective rate
    R(1-PER), which is what latency predictions need, so the estimate reports per = 0.
    """

    alpha: float = 0.5  # weight of the newest sample
    rtt_ms: float | None = None
    rate_up_mbps: float | None = None
    rate_down_mbps: float | None = None

    def add_rtt(self, rtt_s: float) -> None:
        self.rtt_ms = ewma(self.rtt_ms, rtt_s * 1e3, self.alpha)

    def add_probe(self, direction: str, nbytes: int, elapsed_s: float) -> None:
        """A probe of ``nbytes`` (one direction) whose exchange took ``elapsed_s`` including one RTT."""
        rate = probe_rate_mbps(nbytes, elapsed_s, (self.rtt_ms or 0.0) / 1e3)
        if direction == "up":
            self.rate_up_mbps = ewma(self.rate_up_mbps, rate, self.alpha)
        else:
            self.rate_down_mbps = ewma(self.rate_down_mbps, rate, self.alpha)

    def add_round(self, t_comm_s: float, up_bytes: int, down_bytes: int, exchanges: int) -> None:
        """Passive RTT sample from a finished round: comm time minus estimated serialization, per exchange."""
        if self.rtt_ms is None or exchanges < 1:
            return
        ser = sum(nbytes * 8 / (rate * 1e6) for nbytes, rate in ((up_bytes, self.rate_up_mbps),
                                                                  (down_bytes, self.rate_down_mbps)) if rate)
        self.add_rtt(max(t_comm_s - ser, 0.0) / exchanges)

    def csi(self) -> CSI | None:
        """The current estimate, or None before the first RTT sample."""
        if self.rtt_ms is None:
            return None
        return CSI(self.rate_up_mbps or math.inf, self.rate_down_mbps or math.inf, self.rtt_ms)


def probe_rate_mbps(nbytes: int, elapsed_s: float, rtt_s: float, floor_s: float = 1e-5) -> float:
    """Effective rate from a probe: nbytes serialized in (elapsed - RTT) seconds."""
    return nbytes * 8 / max(elapsed_s - rtt_s, floor_s) / 1e6


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
