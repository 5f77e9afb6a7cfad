"""Active RTT probes with scapy (ICMP echo or UDP to a closed port) where raw sockets are allowed (root).

Usage: ``python -m channel.probe HOST [--count 5] [--udp]``.  Each probe's RTT comes from scapy's send and
receive timestamps.  A UDP probe to a closed port is answered by an ICMP port-unreachable, so it works
against hosts that drop echo requests.  Samples can feed ``channel.measure.CSIEstimator.add_rtt``.
"""
from __future__ import annotations

import argparse
import os
import sys


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("host")
    ap.add_argument("--count", type=int, default=5)
    ap.add_argument("--timeout-s", type=float, default=1.0)
    ap.add_argument("--udp", action="store_true", help="UDP to a closed port instead of ICMP echo")
    a = ap.parse_args(argv)
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
