"""Capture -> trace: rates from back-to-back pairs, RTT from data/ACK pairs, PER from retransmissions, outages;
the pcap reader's one-line errors (truncated file, hosts not in it)."""
from __future__ import annotations

import math

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from channel.pcap import ETH_BYTES, Endpoint, Seg, pcap_to_trace, read_segments, stats_to_trace, window_stats
from channel.trace import main

UE, EDGE = ("10.0.0.1", 40000), ("10.0.0.2", 5555)
FLOW = (*UE, *EDGE)
MSS = 1448
FRAME = MSS + 52 + ETH_BYTES  # IP + TCP with timestamps + Ethernet


def bulk(t0: float, n: int, rate_mbps: float, up: bool, seq0: int, rtt_ms: float, drop: int | None = None) -> list[Seg]:
    """A bulk transfer seen at the UE: n back-to-back segments at rate_mbps, each ACKed after rtt_ms (up) or at
    once (down: the UE acks what it receives); segment `drop` is sent again after the rest."""
    gap, out, order = FRAME * 8 / (rate_mbps * 1e6), [], list(range(n)) + ([drop] if drop is not None else [])
    turn = rtt_ms / 1e3 if up else 5e-5
    for k, i in enumerate(order):
        t, seq = t0 + k * gap, seq0 + i * MSS
        out.append(Seg(t, up, FLOW, seq, 1, MSS, FRAME - ETH_BYTES + ETH_BYTES, psh=k == len(order) - 1))
        if i != drop or k == len(order) - 1:
            out.append(Seg(t + turn, not up, FLOW, 1, seq + MSS, 0, 66, False))
    return out


def link(rtt_ms: float) -> list[Seg]:
    """3 s: up 8 / down 16 Mbit/s, then a silent second with data pending, then up 2 Mbit/s with one retransmission."""
    segs = bulk(0.0, 200, 8, True, 0, rtt_ms) + bulk(0.5, 400, 16, False, 0, rtt_ms)
    segs.append(Seg(0.99, True, FLOW, 200 * MSS, 1, MSS, FRAME, False))  # sent, then nothing for a second
    segs += bulk(2.0, 60, 2, True, 201 * MSS, rtt_ms, drop=30)
    return sorted(segs, key=lambda s: s.t_s)


@pytest.mark.parametrize("rtt_ms", [0.2, 20.0, 60.0])
def test_window_stats_of_a_known_link(rtt_ms):
    _, st = window_stats(link(rtt_ms), 1.0, min_pairs=8)
    assert len(st) == 3
    assert st[0].rate_up_mbps == pytest.approx(8, rel=1e-6) and st[0].rate_down_mbps == pytest.approx(16, rel=1e-6)
    assert st[0].rtt_ms == pytest.approx(rtt_ms, abs=1e-6)  # the UE's own data: its ACKs come from the edge
    assert not st[0].outage and st[1].outage and math.isnan(st[1].rate_up_mbps)
    assert st[2].rate_up_mbps == pytest.approx(2, rel=1e-6) and st[2].per_up == pytest.approx(1 / 61)
    assert st[2].per_down == 0.0


def test_trace_fills_unmeasured_windows_and_marks_outages():
    _, st = window_stats(link(20.0), 1.0)
    tr = stats_to_trace(st, 1.0)
    assert tr.t_s == (0.0, 1.0, 2.0) and tr.outage_spans == ((1.0, 2.0),)
    assert tr.csis[1].rate_up_mbps == pytest.approx(8) and tr.csis[2].rate_down_mbps == pytest.approx(16)


def test_endpoint_parse():
    assert Endpoint.parse("127.0.0.1:5555") == Endpoint("127.0.0.1", 5555)
    assert Endpoint.parse("::1") == Endpoint("::1", None) and Endpoint.parse("[::1]:80") == Endpoint("::1", 80)
    assert Endpoint("127.0.0.1", 5555).matches("127.0.0.1", 5555) and not Endpoint("127.0.0.1", 5555).matches(
        "127.0.0.1", 5556)
    with pytest.raises(ValueError, match="expected IP or IP:PORT"):
        Endpoint.parse("host:port")


def write_capture(path, segs: list[Seg]) -> None:
    pkts = []
    for s in segs:
        src, dst = (UE, EDGE) if s.up else (EDGE, UE)
        p = Ether() / IP(src=src[0], dst=dst[0]) / TCP(sport=src[1], dport=dst[1], seq=s.seq, ack=s.ack,
                                                     flags="PA" if s.psh else "A") / Raw(b"x" * s.data)
        p.time = 1_700_000_000 + s.t_s
        pkts.append(p)
    wrpcap(str(path), pkts)


def test_pcap_file_to_trace(tmp_path, capsys):
    cap = tmp_path / "c.pcap"
    write_capture(cap, link(20.0))
    trace, stats = pcap_to_trace(str(cap), "10.0.0.1", "10.0.0.2:5555", 1.0)
    assert stats[0].rtt_ms == pytest.approx(20.0, abs=0.01)
    assert trace.csis[0].rate_up_mbps == pytest.approx(8 * (MSS + 40 + ETH_BYTES) / FRAME, rel=1e-3)  # no TCP options
    assert main(["from-pcap", str(cap), "--ue", "10.0.0.1", "--edge", "10.0.0.2", "--out", str(tmp_path / "t.csv"),
                 "--windows-out", str(tmp_path / "w.csv")]) == 0
    assert "3 windows: rate measured up 2, down 1; RTT 2; outages 1" in capsys.readouterr().out
    assert read_segments(str(cap), Endpoint.parse("10.0.0.2:5555"), Endpoint.parse("10.0.0.1"))[0].up is False


def test_bad_captures_are_one_line(tmp_path, capsys):
    cap = tmp_path / "c.pcap"
    write_capture(cap, link(20.0)[:50])
    assert main(["from-pcap", str(cap), "--ue", "10.9.9.9", "--edge", "10.0.0.2",
                 "--out", str(tmp_path / "t.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no TCP packet between UE 10.9.9.9 and edge 10.0.0.2" in err and "10.0.0.1" in err
    (tmp_path / "cut.pcap").write_bytes(cap.read_bytes()[:-700])
    assert main(["from-pcap", str(tmp_path / "cut.pcap"), "--ue", "10.0.0.1", "--edge", "10.0.0.2",
                 "--out", str(tmp_path / "t.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cut.pcap: packet " in err and "truncated" in err
    (tmp_path / "junk.pcap").write_bytes(b"not a capture at all")
    assert main(["from-pcap", str(tmp_path / "junk.pcap"), "--ue", "10.0.0.1", "--edge", "10.0.0.2",
                 "--out", str(tmp_path / "t.csv")]) == 2
    assert "junk.pcap: not a pcap file" in capsys.readouterr().err
