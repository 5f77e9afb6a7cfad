"""A packet capture of a UE-edge link -> a CSI trace: rate, RTT, PER and outages per window, from TCP alone.

``read_segments`` (scapy) turns a pcap into ``Seg`` rows; the rest is pure.  Per window and direction (up: UE ->
edge, down: edge -> UE):

- rate: the median of ``frame bits / gap`` over back-to-back pairs, two consecutive in-order data segments of one
  flow where the first had no PSH (the sender had more data queued: a bulk transfer or a rate probe), so that the
  gap is the link's serialization time; frame bytes are the IP length plus 14 (Ethernet, as tc's tbf counts).
  A window is measurable in a direction with at least ``min_pairs`` pairs; other windows carry the nearest
  measured rate.
- RTT: data/ACK pairs, a data segment and the first ACK from the other side that covers exactly its end.  At an
  endpoint the ACKs of the data it receives come back at once, so the direction with the smaller median ACK time
  is the capture's own side: RTT is the minimum data/ACK time, per window, of the data the capture's side sent.
- PER: retransmitted data segments (their end at or below the flow's highest end sent) over data segments, per
  direction; 0 where no data passed.
- outage: a window without a single packet while a flow had data unacknowledged.
"""
from __future__ import annotations

import logging
import math
import os
import socket
import struct
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from channel.csi import CSI
from channel.csitrace import CSITrace
from channel.outage import Outages

ETH_BYTES = 14  # added to the IP length: tc's tbf counts Ethernet frames
PSH, ACK = 0x08, 0x10


class Seg(NamedTuple):
    """One TCP segment between the UE and the edge."""

    t_s: float  # capture time, s since the epoch
    up: bool  # UE -> edge (else edge -> UE)
    flow: tuple  # (ue ip, ue port, edge ip, edge port)
    seq: int  # first sequence number
    ack: int  # acknowledgement number (0 without ACK)
    data: int  # payload bytes
    frame: int  # IP length + ETH_BYTES, bytes
    psh: bool  # PSH flag


@dataclass(frozen=True)
class Endpoint:
    """An address, with an optional port to tell flows apart (on loopback)."""

    ip: str  # IPv4 or IPv6 address
    port: int | None  # TCP port, None: any

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        """'10.0.0.1', '10.0.0.1:5555', '[::1]:5555' or '::1'."""
        host, port = text, None
        if text.startswith("["):
            host, _, rest = text[1:].partition("]")
            port = rest.removeprefix(":") or None
        elif text.count(":") == 1:
            host, port = text.split(":")
        if not host or (port is not None and not str(port).isdigit()):
            raise ValueError(f"address {text!r}: expected IP or IP:PORT")
        return cls(host, int(port) if port is not None else None)

    def matches(self, ip: str, port: int) -> bool:
        return ip == self.ip and (self.port is None or port == self.port)


@dataclass(frozen=True)
class WindowStats:
    """What one window measured (NaN where it could not)."""

    rate_up_mbps: float  # median back-to-back rate, UE -> edge; NaN: not measurable
    rate_down_mbps: float  # the same, edge -> UE
    rtt_ms: float  # minimum data/ACK time of the capture side's data; NaN: none
    per_up: float  # retransmitted / data segments, UE -> edge
    per_down: float  # the same, edge -> UE
    outage: bool  # no packet while data was unacknowledged


def segments_of(times: list[float], rows: list[tuple], ue: Endpoint, edge: Endpoint) -> list[Seg]:
    """Seg rows of (src, sport, dst, dport, seq, ack, data, ip_len, flags) tuples between ue and edge."""
    out = []
    for t, (src, sport, dst, dport, seq, ack, data, ip_len, flags) in zip(times, rows):
        if ue.matches(src, sport) and edge.matches(dst, dport):
            out.append(Seg(t, True, (src, sport, dst, dport), seq, ack, data, ip_len + ETH_BYTES, bool(flags & PSH)))
        elif edge.matches(src, sport) and ue.matches(dst, dport):
            out.append(Seg(t, False, (dst, dport, src, sport), seq, ack, data, ip_len + ETH_BYTES, bool(flags & PSH)))
    return out


def _seq_after(a: int, b: int) -> bool:
    """a is after b in 32-bit sequence space."""
    return 0 < (a - b) % (1 << 32) < (1 << 31)


def pair_rates(segs: list[Seg], up: bool) -> list[tuple[float, float]]:
    """(time, Mbit/s) of each back-to-back pair of one direction (see the module docstring)."""
    last: dict[tuple, Seg] = {}
    out = []
    for s in segs:
        if s.up != up or s.data == 0:
            continue
        prev = last.get(s.flow)
        last[s.flow] = s
        if prev is None or prev.psh or s.seq != (prev.seq + prev.data) % (1 << 32):
            continue
        gap = s.t_s - prev.t_s
        if gap > 0:
            out.append((s.t_s, s.frame * 8 / gap / 1e6))
    return out


def ack_times(segs: list[Seg], up: bool) -> list[tuple[float, float]]:
    """(time, ms) of each data/ACK pair whose data went in direction ``up`` (Karn: retransmitted data skipped)."""
    pending: dict[tuple, dict[int, float]] = {}  # flow -> end seq -> send time
    sent_end: dict[tuple, int] = {}
    out = []
    for s in segs:
        if s.up == up and s.data > 0:
            end = (s.seq + s.data) % (1 << 32)
            ends = pending.setdefault(s.flow, {})
            if s.flow in sent_end and not _seq_after(end, sent_end[s.flow]):
                ends.pop(end, None)  # a retransmission: its ACK time is ambiguous
                continue
            sent_end[s.flow] = end
            ends[end] = s.t_s
        elif s.up != up and s.flow in pending:
            t0 = pending[s.flow].pop(s.ack, None)
            if t0 is not None:
                out.append((t0, (s.t_s - t0) * 1e3))
            for e in [e for e in pending[s.flow] if not _seq_after(e, s.ack)]:
                del pending[s.flow][e]  # acknowledged by a later ACK: no exact pair
    return out


def retransmissions(segs: list[Seg], up: bool) -> list[tuple[float, bool]]:
    """(time, retransmitted) of each data segment of one direction."""
    high: dict[tuple, int] = {}
    out = []
    for s in segs:
        if s.up != up or s.data == 0:
            continue
        end = (s.seq + s.data) % (1 << 32)
        again = s.flow in high and not _seq_after(end, high[s.flow])
        if not again:
            high[s.flow] = end
        out.append((s.t_s, again))
    return out


def unacked_at(segs: list[Seg], times: np.ndarray) -> np.ndarray:
    """[len(times)] bool: some flow had data sent and not yet acknowledged at each time."""
    high: dict[tuple[tuple, bool], int] = {}  # (flow, direction) -> highest end sent
    acked: dict[tuple[tuple, bool], int] = {}
    out, i = np.zeros(len(times), dtype=bool), 0
    for k, t in enumerate(times):
        while i < len(segs) and segs[i].t_s < t:
            s = segs[i]
            if s.data > 0:
                key, end = (s.flow, s.up), (s.seq + s.data) % (1 << 32)
                if key not in high or _seq_after(end, high[key]):
                    high[key] = end
            if s.ack:
                acked[(s.flow, not s.up)] = s.ack
            i += 1
        out[k] = any(key in acked and _seq_after(h, acked[key]) or key not in acked for key, h in high.items())
    return out


def window_stats(segs: list[Seg], window_s: float, min_pairs: int = 8) -> tuple[float, list[WindowStats]]:
    """(start time, per-window stats) of a capture's segments, windows of window_s from the first segment."""
    if not segs:
        raise ValueError("no segments")
    t0 = segs[0].t_s
    n = max(1, math.ceil((segs[-1].t_s - t0) / window_s + 1e-9))
    win = lambda t: min(int((t - t0) // window_s), n - 1)  # noqa: E731
    rates = {d: _per_window([(win(t), r) for t, r in pair_rates(segs, d)], n, min_pairs, np.median) for d in (1, 0)}
    acks = {d: ack_times(segs, d) for d in (True, False)}
    own = min((True, False), key=lambda d: -np.median([a for _, a in acks[d]]) if acks[d] else math.inf)
    rtt = _per_window([(win(t), a) for t, a in acks[own]], n, 1, np.min)
    per = {d: _per_window([(win(t), float(r)) for t, r in retransmissions(segs, d)], n, 1, np.mean) for d in (1, 0)}
    busy = np.bincount([win(s.t_s) for s in segs], minlength=n) > 0
    pending = unacked_at(segs, t0 + np.arange(n) * window_s)
    return t0, [WindowStats(rates[1][i], rates[0][i], rtt[i], _zero(per[1][i]), _zero(per[0][i]),
                            bool(not busy[i] and pending[i])) for i in range(n)]


def _per_window(samples: list[tuple[int, float]], n: int, least: int, stat) -> np.ndarray:
    """[n] stat of each window's samples; NaN with fewer than ``least``."""
    by: list[list[float]] = [[] for _ in range(n)]
    for w, v in samples:
        by[w].append(v)
    return np.array([float(stat(v)) if len(v) >= least else math.nan for v in by])


def _zero(x: float) -> float:
    return 0.0 if math.isnan(x) else x


def stats_to_trace(stats: list[WindowStats], window_s: float) -> CSITrace:
    """The CSI trace: measured values, gaps filled from the nearest measured window (earlier first)."""
    cols = {c: _filled([getattr(s, c) for s in stats], c) for c in ("rate_up_mbps", "rate_down_mbps", "rtt_ms")}
    csis = tuple(CSI(cols["rate_up_mbps"][i], cols["rate_down_mbps"][i], cols["rtt_ms"][i],
                     min(s.per_up, 0.99), min(s.per_down, 0.99)) for i, s in enumerate(stats))
    spans = tuple((i * window_s, (i + 1) * window_s) for i, s in enumerate(stats[:-1]) if s.outage)
    return CSITrace(tuple(i * window_s for i in range(len(stats))), csis, outage_spans=Outages.make(list(spans)).spans)


def _filled(values: list[float], name: str) -> list[float]:
    """NaNs replaced by the last measured value (before the first: the first measured)."""
    known = [v for v in values if not math.isnan(v)]
    if not known:
        raise ValueError(f"no window has a measurable {name}: the capture holds no "
                         + ("bulk transfer or rate probe" if "rate" in name else "data/ACK pair"))
    out, last = [], known[0]
    for v in values:
        last = last if math.isnan(v) else v
        out.append(last)
    return out


def measured_line(stats: list[WindowStats]) -> str:
    """One line: how many windows measured what."""
    count = lambda f: sum(not math.isnan(getattr(s, f)) for s in stats)  # noqa: E731
    return (f"{len(stats)} windows: rate measured up {count('rate_up_mbps')}, down {count('rate_down_mbps')}; "
            f"RTT {count('rtt_ms')}; outages {sum(s.outage for s in stats)}; the rest carry the nearest measured value")


def stats_frame(stats: list[WindowStats], window_s: float) -> pd.DataFrame:
    """One row per window: its start and what it measured (NaN: not measurable)."""
    return pd.DataFrame([{"t_s": i * window_s, **asdict(s)} for i, s in enumerate(stats)])


def read_segments(path: str, ue: Endpoint, edge: Endpoint) -> list[Seg]:
    """TCP segments between ue and edge in a pcap (scapy); ValueError naming the file and packet when it is
    truncated or holds no such segment."""
    times, rows, seen = [], [], set()
    for t, row in _tcp_rows(path):
        times.append(t)
        rows.append(row)
        seen.add(row[0])
    segs = segments_of(times, rows, ue, edge)
    if not segs:
        raise ValueError(f"{path}: no TCP packet between UE {_show(ue)} and edge {_show(edge)} in {len(rows)} TCP "
                         f"packets (addresses seen: {', '.join(sorted(seen)[:6]) or 'none'})")
    return sorted(segs, key=lambda s: s.t_s)


def _show(e: Endpoint) -> str:
    return e.ip + (f":{e.port}" if e.port is not None else "")


def _tcp_rows(path: str) -> Iterator[tuple[float, tuple]]:
    """(time, (src, sport, dst, dport, seq, ack, data, ip_len, flags)) of each TCP packet (records read by scapy,
    headers unpacked here: several times faster than dissecting)."""
    from scapy.error import Scapy_Exception
    from scapy.utils import RawPcapReader

    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)  # our own one-line errors instead of its warnings
    try:
        reader = RawPcapReader(path)
    except (Scapy_Exception, EOFError) as e:
        raise ValueError(f"{path}: not a pcap file ({e})") from None
    if not hasattr(reader, "nano"):
        raise ValueError(f"{path}: a pcapng file: save the capture as pcap (tcpdump -w, editcap -F pcap)")
    if reader.linktype not in L2_HEADER:
        raise ValueError(f"{path}: link type {reader.linktype} not read (Ethernet, Linux cooked, raw IP, loopback)")
    scale, n = 1e-9 if reader.nano else 1e-6, 0
    with reader:
        for n, (data, meta) in enumerate(reader, start=1):
            if len(data) < min(meta.caplen, 65535):
                raise ValueError(f"{path}: packet {n}: truncated ({len(data)} of {meta.caplen} bytes)")
            row = _tcp_header(data, reader.linktype)
            if row is not None:
                yield meta.sec + meta.usec * scale, row
        tail = reader.f.tell()
    if tail < os.path.getsize(path) and not path.endswith(".gz"):
        raise ValueError(f"{path}: packet {n + 1}: truncated header ({os.path.getsize(path) - tail} bytes left)")


L2_HEADER = {1: 14, 113: 16, 276: 20, 101: 0, 228: 0, 229: 0, 0: 4, 108: 4}  # link type -> bytes before IP


def _tcp_header(data: bytes, linktype: int) -> tuple | None:
    """(src, sport, dst, dport, seq, ack, data, ip_len, flags) of a TCP/IP packet, None for anything else."""
    off = L2_HEADER[linktype]
    if linktype == 1 and data[12:14] == b"\x81\x00":  # one VLAN tag
        off += 4
    ip = data[off:]
    if len(ip) < 20:
        return None
    if ip[0] >> 4 == 4 and ip[9] == 6:
        hl, ip_len, src, dst = (ip[0] & 15) * 4, int.from_bytes(ip[2:4], "big"), ip[12:16], ip[16:20]
        family = socket.AF_INET
    elif ip[0] >> 4 == 6 and len(ip) >= 40 and ip[6] == 6:
        hl, ip_len, src, dst = 40, int.from_bytes(ip[4:6], "big") + 40, ip[8:24], ip[24:40]
        family = socket.AF_INET6
    else:
        return None
    tcp = ip[hl:hl + 20]
    if len(tcp) < 20:
        return None
    sport, dport, seq, ack, off_flags = struct.unpack("!HHIIH", tcp[:14])
    flags = off_flags & 0x1FF
    return (socket.inet_ntop(family, src), sport, socket.inet_ntop(family, dst), dport, seq,
            ack if flags & ACK else 0, max(ip_len - hl - (off_flags >> 12) * 4, 0), ip_len, flags)


def pcap_windows(path: str, ue: str, edge: str, window_s: float, min_pairs: int = 8) -> tuple[float, list[WindowStats]]:
    """(the first segment's time, what each window measured) of a capture."""
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    return window_stats(read_segments(path, Endpoint.parse(ue), Endpoint.parse(edge)), window_s, min_pairs)


def pcap_to_trace(path: str, ue: str, edge: str, window_s: float,
                  min_pairs: int = 8) -> tuple[CSITrace, list[WindowStats]]:
    """The CSI trace of a capture, and what each window measured."""
    _, stats = pcap_windows(path, ue, edge, window_s, min_pairs)
    try:
        return stats_to_trace(stats, window_s), stats
    except ValueError as e:
        raise ValueError(f"{path}: {e} (or lower --min-pairs)") from None
