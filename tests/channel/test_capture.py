"""Capturing a run: the interface from the route, the command (tcpdump or scapy), and a real loopback capture (root)."""
from __future__ import annotations

import os
import socket
import sys
import threading

import pytest

from channel.capture import capture_cmd, capturing, host_of, iface_for, route_dev
from channel.pcap import Endpoint, read_segments


def test_route_and_host():
    assert route_dev("10.0.0.2 via 10.0.0.1 dev eth0 src 10.0.0.5 uid 0\n    cache") == "eth0"
    assert route_dev("local 127.0.0.1 dev lo table local src 127.0.0.1") == "lo" and route_dev("") is None
    assert host_of("tcp://10.0.0.2:5555") == "10.0.0.2" and host_of("tcp://[::1]:5555") == "::1"
    assert iface_for(None, None, "tcp://10.0.0.2:5555") == "" and iface_for("x.pcap", "eth9", "tcp://h:1") == "eth9"
    assert iface_for("x.pcap", None, "tcp://127.0.0.1:5555") == "lo"
    with pytest.raises(ValueError, match="give --capture-iface"):
        iface_for("x.pcap", None, "tcp://0.0.0.0:5555")


def test_capture_cmd():
    assert capture_cmd("eth0", "a.pcap", True)[:3] == ["tcpdump", "-i", "eth0"]
    assert capture_cmd("eth0", "a.pcap", False) == [sys.executable, "-m", "channel.capture", "--iface", "eth0",
                                                    "--out", "a.pcap"]


@pytest.mark.skipif(os.geteuid() != 0, reason="capturing needs root")
def test_loopback_capture_reads_back(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]

    def drain() -> None:
        c, _ = srv.accept()
        while c.recv(1 << 16):
            pass

    out = tmp_path / "lo.pcap"
    with capturing(str(out), "lo"):
        threading.Thread(target=drain, daemon=True).start()
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"x" * 100_000)
    segs = read_segments(str(out), Endpoint("127.0.0.1", None), Endpoint("127.0.0.1", port))
    assert sum(s.data for s in segs if s.up) == 100_000 and any(not s.up for s in segs)
