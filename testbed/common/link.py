"""The emulated link of a run: flags -> LinkSpec -> CSI in force at any time, and the emulator's config."""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field

from channel.csi import CSI
from channel.csitrace import CSITrace, load_trace
from channel.emulator import LinkConfig
from channel.outage import parse_outages


@dataclass
class LinkSpec:
    """Link settings of a run (None rate = unlimited); a CSI trace, when given, overrides the fixed values."""

    rate_up_mbps: float | None = field(default=20.0, metadata={"min": 0})  # uplink rate, Mbit/s (0 or none: unlimited)
    rate_down_mbps: float | None = field(default=20.0, metadata={
        "min": 0})  # downlink rate, Mbit/s (0 or none: unlimited)
    rtt_ms: float = field(default=20.0, metadata={"min": 0})  # round-trip propagation delay, ms
    jitter_ms: float = field(default=0.0, metadata={"min": 0})  # std of the one-way delay jitter, ms
    per: float = field(default=0.0, metadata={"min": 0, "below": 1})  # packet error rate of each direction, [0, 1)
    csi_trace: str | None = None  # CSV of t_s, rate_up_mbps, rate_down_mbps, rtt_ms, per
    seed: int = 0  # seed of the loss and jitter draws
    host_overhead_ms: float = field(default=0.0, metadata={
        "min": 0})  # hosts' one-way cost taken out of each delay, ms (scripts/bench/link.py measures it)
    outages: str = field(default="", metadata={  # outage periods START_S:DURATION_S[,...] from the link's start:
        "example": "10:5"})  # nothing passes (bytes held)

    def __post_init__(self) -> None:
        parse_outages(self.outages)  # ValueError naming a bad period

    @property
    def emulated(self) -> bool:
        """True when the link has anything to emulate (a finite rate, delay, jitter, loss or a CSI trace)."""
        return bool(self.csi_trace or self.outages) or self.jitter_ms != 0 or not self.fixed_csi().is_ideal

    def fixed_csi(self) -> CSI:
        up = self.rate_up_mbps if self.rate_up_mbps else math.inf
        down = self.rate_down_mbps if self.rate_down_mbps else math.inf
        return CSI(up, down, self.rtt_ms, self.per, self.per)

    def trace(self) -> CSITrace:
        """The CSI in force over time, with the trace's outages and those of ``outages``."""
        trace = load_trace(self.csi_trace) if self.csi_trace else CSITrace.constant(self.fixed_csi())
        return trace.with_outages(parse_outages(self.outages))

    def emulator_config(self, target_port: int, target_host: str = "127.0.0.1",
                        listen_host: str = "127.0.0.1") -> LinkConfig:
        csi = None if self.csi_trace else self.fixed_csi()
        return LinkConfig(target_port=target_port, target_host=target_host, listen_host=listen_host,
                          csi=None if csi is not None and csi.is_ideal else csi,
                          trace=self.csi_trace, jitter_ms=self.jitter_ms, seed=self.seed,
                          host_overhead_ms=self.host_overhead_ms, outages=self.outages)


def add_rate_flag(ap: argparse.ArgumentParser) -> None:
    """``--rate-mbps``: both directions at once (apply_rate_flag puts it in the values)."""
    ap.add_argument("--rate-mbps", type=float, default=argparse.SUPPRESS, metavar="MBPS",
                    help=f"link rate of both directions, Mbit/s (0: unlimited; default: {LinkSpec.rate_up_mbps:g}); "
                         "--rate-up-mbps / --rate-down-mbps override one direction")


def apply_rate_flag(values: dict, ns: argparse.Namespace) -> None:
    """``--rate-mbps`` sets both link rates, but not one given by its own flag (``link.rate_up_mbps``)."""
    if "rate_mbps" not in vars(ns):
        return
    if not ns.rate_mbps >= 0:
        raise ValueError(f"--rate-mbps: must be >= 0 (0: unlimited), got {ns.rate_mbps:g}")
    link = values.setdefault("link", {})
    for key in ("rate_up_mbps", "rate_down_mbps"):
        if f"link.{key}" not in vars(ns):
            link[key] = ns.rate_mbps
