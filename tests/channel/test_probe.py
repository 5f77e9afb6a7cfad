"""scapy probes: loopback RTTs as root (ICMP and UDP), a clear error without raw sockets, bad arguments."""
import os

import pytest

from channel import probe

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="scapy probes need raw sockets (root)")


@needs_root
@pytest.mark.parametrize("udp", [False, True])
def test_loopback_probes_get_replies(udp):
    rtts = probe.rtts_ms("127.0.0.1", count=2, timeout_s=2.0, udp=udp)
    assert len(rtts) == 2 and all(r is not None and 0 <= r < 1000 for r in rtts)


def test_without_root_the_error_says_why(monkeypatch):
    monkeypatch.setattr(probe.os, "geteuid", lambda: 1000)
    with pytest.raises(probe.ProbeUnavailable, match="root"):
        probe.rtts_ms("127.0.0.1")
    assert probe.main(["127.0.0.1"]) == 2


@needs_root
def test_bad_arguments():
    with pytest.raises(ValueError):
        probe.rtts_ms("127.0.0.1", count=0)
