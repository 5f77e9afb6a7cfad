"""A real link's loss estimate: TCP retransmissions per data segment sent, from ``ss -tin`` output."""
from __future__ import annotations

import shutil
import socket

import pytest

from channel.measure import retransmission_rate, sample_tcp, tcp_counters

SS = """ESTAB 0 0 10.0.0.1:58628 10.0.0.2:5555
\t cubic wscale:7,7 rto:204 rtt:3.2/1.1 mss:1448 bytes_sent:90211 segs_out:120 data_segs_out:100 retrans:0/4 lost:0
ESTAB 0 0 10.0.0.1:58630 10.0.0.2:5555
\t cubic wscale:7,7 rto:204 rtt:3.0/1.0 mss:1448 bytes_sent:4000 segs_out:60 data_segs_out:50
"""


def test_counters_sum_every_connection_and_read_total_retransmissions():
    assert tcp_counters(SS) == (150, 4)
    assert tcp_counters("State Recv-Q Send-Q Local Address:Port Peer Address:Port\n") is None


@pytest.mark.parametrize("before, after, rate", [
    ((150, 4), (250, 9), 0.05),  # 5 of 100 new segments retransmitted
    ((150, 4), (250, 4), 0.0),
    ((150, 4), (150, 4), None),  # nothing sent: no estimate
    (None, (250, 9), None),
    ((150, 4), None, None),
])
def test_retransmission_rate(before, after, rate):
    assert retransmission_rate(before, after) == (pytest.approx(rate) if rate is not None else None)


@pytest.mark.skipif(shutil.which("ss") is None, reason="iproute2's ss is not installed")
def test_sample_a_live_loopback_connection():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            conn, _ = server.accept()
            client.sendall(b"x" * 1000)
            conn.recv(1000)
            sent, retrans = sample_tcp("127.0.0.1", port)
            conn.close()
    assert sent >= 1 and retrans == 0
    assert sample_tcp("127.0.0.1", 1) is None  # no connection there
