"""Namespace topology: pure command builders, the netem_link script's dry run, and a real root-only round trip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from channel.netns import NetnsTopology, exec_prefix, parse_ping_rtts, ping_cmd, ping_rtts, topology
from channel.tc import applied, clear_cmds, tbf_cmds

REPO = Path(__file__).resolve().parents[2]
SCRIPT = ["-m", "scripts.link.netem"]  # run from the repository root (REPO)


def _netns_usable() -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "needs root to create network namespaces"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return False, "iproute2 (`ip`, `tc`) not installed"
    if subprocess.run(["ip", "netns", "list"], capture_output=True, check=False).returncode != 0:
        return False, "`ip netns` is not available here"
    return True, ""


_OK, _WHY = _netns_usable()
needs_netns = pytest.mark.skipif(not _OK, reason=_WHY)


def _namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout


def test_names_and_addresses() -> None:
    t = NetnsTopology("ab12", subnet=7)
    assert (t.ue_ns, t.edge_ns, t.ue_dev, t.edge_dev) == ("wisv-ue-ab12", "wisv-edge-ab12", "wvab12u", "wvab12e")
    assert (t.ue_addr, t.edge_addr, t.prefix_len) == ("10.77.7.1", "10.77.7.2", 30)
    assert len(NetnsTopology("abcdefgh").ue_dev) <= 15


@pytest.mark.parametrize("short_id, subnet", [("AB", -1), ("a-b", -1), ("abcdefghi", -1), ("", -1), ("ab", 256)])
def test_bad_ids(short_id: str, subnet: int) -> None:
    with pytest.raises(ValueError):
        NetnsTopology(short_id, subnet)


def test_setup_and_teardown_cmds() -> None:
    t = NetnsTopology("ab12", subnet=7)
    cmds = t.setup_cmds()
    assert cmds[:3] == [["ip", "netns", "add", "wisv-ue-ab12"], ["ip", "netns", "add", "wisv-edge-ab12"],
                        ["ip", "-n", "wisv-ue-ab12", "link", "add", "wvab12u", "type", "veth",
                         "peer", "name", "wvab12e", "netns", "wisv-edge-ab12"]]
    assert ["ip", "-n", "wisv-ue-ab12", "addr", "add", "10.77.7.1/30", "dev", "wvab12u"] in cmds
    assert ["ip", "-n", "wisv-edge-ab12", "addr", "add", "10.77.7.2/30", "dev", "wvab12e"] in cmds
    assert ["ip", "-n", "wisv-edge-ab12", "link", "set", "lo", "up"] in cmds
    assert all(c[:2] in (["ip", "netns"], ["ip", "-n"]) for c in cmds)  # never the host namespace
    assert t.teardown_cmds() == [["ip", "netns", "del", "wisv-edge-ab12"], ["ip", "netns", "del", "wisv-ue-ab12"]]
    assert t.teardown_cmds(("wisv-ue-ab12",)) == [["ip", "netns", "del", "wisv-ue-ab12"]]


def test_exec_prefix_and_ping_cmd() -> None:
    assert exec_prefix("wisv-ue-x") == ["ip", "netns", "exec", "wisv-ue-x"]
    assert ping_cmd("n", "10.77.0.2", 2, 1.0, have_ping=True) == exec_prefix("n") + [
        "ping", "-n", "-c", "2", "-i", "0.2", "-W", "1", "10.77.0.2"]
    fallback = ping_cmd("n", "10.77.0.2", 2, 1.0, have_ping=False)
    assert fallback[4] == sys.executable and fallback[-3:] == ["10.77.0.2", "2", "1.0"]


def test_parse_ping_rtts() -> None:
    text = "64 bytes from 10.77.0.2: icmp_seq=1 ttl=64 time=0.042 ms\nreply from x: icmp_seq=2 time=12.5 ms\n"
    assert parse_ping_rtts(text) == [0.042, 12.5]


def test_dry_run_touches_nothing() -> None:
    cmds: list[str] = []
    with topology("zz99", dry_run=True, echo=cmds.append) as t:
        assert t.ue_ns == "wisv-ue-zz99"
    assert cmds[0] == "(dry run) ip netns add wisv-ue-zz99" and cmds[-1] == "(dry run) ip netns del wisv-ue-zz99"


def test_script_dry_run() -> None:
    args = ["--rate-mbps", "20", "--rtt-ms", "40", "--jitter-ms", "2", "--per", "0.01", "--dry-run"]
    res = subprocess.run([sys.executable, *SCRIPT, *args], cwd=REPO, capture_output=True, text=True, timeout=30,
                         check=False)
    assert res.returncode == 0, res.stderr
    assert "root netem delay 20ms 1ms loss 1% rate 20mbit limit 1000" in res.stdout
    assert "(dry run) ip netns del" in res.stdout
    fallback = subprocess.run([sys.executable, *SCRIPT, *args, "--no-netem"], cwd=REPO, capture_output=True, text=True,
                              timeout=30, check=False)
    assert "root tbf rate 20mbit burst 12500 latency 50ms" in fallback.stdout
    assert "delay/jitter/loss via the user-space emulator" in fallback.stdout


def test_script_bad_args_exit_2() -> None:
    res = subprocess.run([sys.executable, *SCRIPT, "--per", "2", "--dry-run"], cwd=REPO, capture_output=True, text=True,
                         timeout=30, check=False)
    assert res.returncode == 2 and "per" in res.stderr


@pytest.mark.root
@needs_netns
def test_real_topology_ping_and_tbf() -> None:
    with topology() as t:
        assert t.ue_ns in _namespaces() and t.edge_ns in _namespaces()
        assert ping_rtts(t.ue_ns, t.edge_addr, count=1, timeout_s=1.0)
        with applied(tbf_cmds(t.ue_dev, 20, netns=t.ue_ns), clear_cmds(t.ue_dev, t.ue_ns)):
            show = subprocess.run(exec_prefix(t.ue_ns) + ["tc", "qdisc", "show", "dev", t.ue_dev],
                                  capture_output=True, text=True, check=True).stdout
            assert "tbf" in show and "20Mbit" in show
        show = subprocess.run(exec_prefix(t.ue_ns) + ["tc", "qdisc", "show", "dev", t.ue_dev],
                              capture_output=True, text=True, check=True).stdout
        assert "tbf" not in show
    assert t.ue_ns not in _namespaces() and t.edge_ns not in _namespaces()


@pytest.mark.root
@needs_netns
def test_real_topology_torn_down_on_error() -> None:
    with pytest.raises(KeyError):
        with topology() as t:
            raise KeyError("boom")
    assert t.ue_ns not in _namespaces() and t.edge_ns not in _namespaces()


@pytest.mark.root
@needs_netns
def test_script_real_run() -> None:
    res = subprocess.run([sys.executable, *SCRIPT, "--rate-mbps", "20", "--rtt-ms", "40", "--ping-count", "1"],
                         cwd=REPO, capture_output=True, text=True, timeout=30, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "netem:" in res.stdout and "1/1 replies" in res.stdout
    assert not any(line.startswith("wisv-ue-") and line.split()[0] in res.stdout for line in _namespaces().splitlines())


class FakeIp:
    """A fake `ip` runner keeping the namespaces it was asked to add; raises Interrupt after adding ``cut_at``."""

    class Interrupt(Exception):
        """Stands in for a signal arriving between creating a namespace and noting it."""

    def __init__(self, cut_at: str | None = None):
        self.namespaces: set[str] = set()
        self.cut_at = cut_at

    def __call__(self, cmd, **_kw):
        if cmd[:3] == ["ip", "netns", "add"]:
            self.namespaces.add(cmd[3])
            if cmd[3] == self.cut_at:
                raise FakeIp.Interrupt(cmd[3])
        elif cmd[:3] == ["ip", "netns", "del"]:
            self.namespaces.discard(cmd[3])
        out = "".join(f"{n} (id: 1)\n" for n in sorted(self.namespaces)) if cmd[:3] == ["ip", "netns", "list"] else ""
        return subprocess.CompletedProcess(cmd, 0, out, "")


def test_a_namespace_created_just_before_an_interruption_is_still_removed(monkeypatch) -> None:
    from channel import netns
    monkeypatch.setattr(netns, "require_root", lambda: None)
    ip = FakeIp(cut_at="wisv-edge-cut1")
    with pytest.raises(FakeIp.Interrupt):
        with topology("cut1", runner=ip):
            pass
    assert ip.namespaces == set() and not netns._OPEN


def test_teardown_open_removes_what_an_interrupted_run_left(monkeypatch) -> None:
    from channel import netns
    monkeypatch.setattr(netns, "require_root", lambda: None)
    ip = FakeIp()
    ctx = topology("open1", runner=ip)
    ctx.__enter__()  # an interruption that never reached the context's exit
    assert ip.namespaces == {"wisv-ue-open1", "wisv-edge-open1"}
    assert sorted(netns.open_namespaces()) == ["wisv-edge-open1", "wisv-ue-open1"]  # what a run's record notes
    assert sorted(netns.teardown_open()) == ["wisv-edge-open1", "wisv-ue-open1"]
    assert ip.namespaces == set() and not netns._OPEN and netns.open_namespaces() == []
