"""The emulated link of a run: flags -> LinkSpec -> CSI in force at any time, and the emulator's config."""
from __future__ import annotations

import math
from dataclasses import dataclass

from channel.csi import CSI
from channel.emulator import LinkConfig
from channel.trace import CSITrace, load_trace


@dataclass
class LinkSpec:
    """Link settings of a run (None rate = unlimited); a CSI trace, when given, overrides the fixed values."""

    rate_up_mbps: float | None = 20.0  # uplink rate, Mbit/s
    rate_down_mbps: float | None = 20.0  # downlink rate, Mbit/s
    rtt_ms: float = 20.0  # round-trip propagation delay, ms
    jitter_ms: float = 0.0  # std of the one-way delay jitter, ms
    per: float = 0.0  # packet error rate of each direction, [0, 1)
    csi_trace: str | None = None  # CSV of t_s, rate_up_mbps, rate_down_mbps, rtt_ms, per
    seed: int = 0  # loss/jitter draws
    host_overhead_ms: float = 0.0  # hosts' one-way cost the user-space emulator takes out of each delay, ms

    def fixed_csi(self) -> CSI:
        up = self.rate_up_mbps if self.rate_up_mbps else math.inf
        down = self.rate_down_mbps if self.rate_down_mbps else math.inf
        return CSI(up, down, self.rtt_ms, self.per, self.per)

    def trace(self) -> CSITrace:
        return load_trace(self.csi_trace) if self.csi_trace else CSITrace.constant(self.fixed_csi())

    def emulator_config(self, target_port: int, target_host: str = "127.0.0.1",
                        listen_host: str = "127.0.0.1") -> LinkConfig:
        csi = None if self.csi_trace else self.fixed_csi()
        return LinkConfig(target_port=target_port, target_host=target_host, listen_host=listen_host,
                          csi=None if csi is not None and csi.is_ideal else csi,
                          trace=self.csi_trace, jitter_ms=self.jitter_ms, seed=self.seed,
                          host_overhead_ms=self.host_overhead_ms)


def resolve_rates(rate: float | None, up: float | None, down: float | None) -> tuple[float | None, float | None]:
    """``--rate-mbps`` sets both directions; ``--rate-up-mbps``/``--rate-down-mbps`` override one each."""
    return (up if up is not None else rate), (down if down is not None else rate)
