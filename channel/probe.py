"""Active RTT probes with scapy (ICMP echo or UDP to a closed port) where raw sockets are allowed (root).

Usage: ``python -m channel.probe HOST [--count 5] [--udp]``.  Each probe's RTT comes from scapy's send and
receive timestamps.  A UDP probe to a closed port is answered by an ICMP port-unreachable, so it works
against hosts that drop echo requests.  Samples can feed ``channel.measure.CSIEstimator.add_rtt``.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field

import config


@dataclass
class ProbeConfig:
    """One series of probes from the command line."""

    host: str = field(default="", metadata={"positional": True})  # host name or address to probe
    count: int = 5  # probes sent, one after another
    timeout_s: float = 1.0  # wait for each reply, s
    udp: bool = False  # UDP to a closed port instead of ICMP echo


class ProbeUnavailable(RuntimeError):
    """Raw sockets are not allowed here (not root)."""


def rtts_ms(host: str, count: int = 5, timeout_s: float = 1.0, udp: bool = False, payload_bytes: int = 32,
            port: int = 33434) -> list[float | None]:
    """RTT of each probe in ms (None when no reply came within timeout_s)."""
    if os.geteuid() != 0:
        raise ProbeUnavailable("scapy probes need raw sockets (root); use the handshake RTT of channel.measure instead")
    if count < 1 or timeout_s <= 0:
        raise ValueError(f"need count >= 1 and timeout_s > 0, got {count}, {timeout_s}")
    from scapy.all import ICMP, IP, UDP, Raw, conf, sr1  # imported here: scapy is slow to import
    conf.verb = 0
    out = []
    for seq in range(count):
        layer = UDP(dport=port + seq) if udp else ICMP(id=os.getpid() & 0xFFFF, seq=seq)
        pkt = IP(dst=host) / layer / Raw(b"\0" * payload_bytes)
        ans = sr1(pkt, timeout=timeout_s)
        out.append(None if ans is None else (float(ans.time) - float(pkt.sent_time)) * 1e3)
    return out


def parse_args(argv: list[str] | None = None) -> ProbeConfig:
    ap = argparse.ArgumentParser(prog="python -m channel.probe", description=__doc__.splitlines()[0])
    return config.parse(ProbeConfig, argv, config.add_flags(ap, ProbeConfig))


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        rtts = rtts_ms(a.host, a.count, a.timeout_s, a.udp)
    except ProbeUnavailable as e:
        print(f"channel.probe: {e}", file=sys.stderr)
        return 2
    got = [r for r in rtts if r is not None]
    print(" ".join("lost" if r is None else f"{r:.3f}" for r in rtts) + " ms")
    if got:
        print(f"{len(got)}/{len(rtts)} replies, min {min(got):.3f} ms, median {sorted(got)[len(got) // 2]:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
