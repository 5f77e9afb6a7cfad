"""Record a packet capture during a run: tcpdump where installed, else scapy (this module's own command line).

``capturing(out, iface)`` starts the capture as a child process (root: raw sockets), yields, then stops it (SIGINT,
by PID) and waits for the file.  The interface defaults to the one the route to the peer uses (``ip route get``).
Only headers are kept (``SNAP_BYTES`` per packet).  ``python -m channel.capture --iface DEV --out FILE`` is the
scapy capture itself; it stops on SIGINT/SIGTERM.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator

from channel.tc import Cmd, ns_prefix

SNAP_BYTES = 128  # bytes kept per packet: Ethernet, IP and TCP headers with options
QUIET_S = 0.3  # after SIGINT the capture goes on until the socket has been quiet this long, s
DRAIN_S = 1.0  # ... but no longer than this (a busy interface is never quiet), s
ETH_P_ALL, SO_TIMESTAMPNS, PACKET_OUTGOING, ARPHRD_LOOPBACK = 0x0003, 35, 4, 772  # Linux constants
LINK_TYPES = (1, ARPHRD_LOOPBACK)  # Ethernet, and loopback (which carries a zeroed Ethernet header)
START_S = 1.0  # tcpdump: wait this long for it to start before the run goes on (scapy's says READY)


def route_dev(route_get_output: str) -> str | None:
    """The device of `ip route get ADDR`'s answer ('... dev eth0 src ...'), None when absent."""
    m = re.search(r"\bdev\s+(\S+)", route_get_output)
    return m.group(1) if m else None


def host_of(endpoint: str) -> str:
    """tcp://HOST:PORT -> HOST (brackets of an IPv6 address dropped)."""
    hostport = endpoint.split("://", 1)[-1]
    host = hostport.rsplit(":", 1)[0] if hostport.count(":") == 1 or hostport.startswith("[") else hostport
    return host.strip("[]")


def iface_to(peer_host: str) -> str:
    """The interface the route to peer_host uses; ValueError when there is none."""
    if peer_host in ("0.0.0.0", "*", "::"):
        raise ValueError("--capture: bound to every interface: give --capture-iface")
    host = "127.0.0.1" if peer_host == "localhost" else peer_host
    res = subprocess.run(["ip", "route", "get", host], capture_output=True, text=True, check=False)
    dev = route_dev(res.stdout)
    if res.returncode != 0 or dev is None:
        why = res.stderr.strip() or res.stdout.strip()
        raise ValueError(f"--capture: no route to {host} to find the interface ({why}): "
                         "give --capture-iface")
    return dev


def iface_for(out: str | None, iface: str | None, peer_endpoint: str) -> str:
    """--capture-iface, else the interface of the route to the peer (tcp://HOST:PORT); '' without a capture."""
    return "" if not out else iface or iface_to(host_of(peer_endpoint))


def capture_cmd(iface: str, out: str, have_tcpdump: bool) -> Cmd:
    """tcpdump (headers of TCP packets, written as they come) or this module's scapy capture."""
    if have_tcpdump:
        return ["tcpdump", "-i", iface, "-s", str(SNAP_BYTES), "-U", "-n", "-w", out, "tcp"]
    return [sys.executable, "-m", "channel.capture", "--iface", iface, "--out", out]


def check_can_capture(out: str) -> None:
    """One-line ValueError when a capture cannot be recorded here."""
    if os.geteuid() != 0:
        raise ValueError(f"--capture {out}: capturing packets needs root (raw sockets): run as root or drop --capture")
    if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        raise ValueError(f"--capture {out}: its directory does not exist")


@contextlib.contextmanager
def capturing(out: str | None, iface: str, netns: str | None = None) -> Iterator[None]:
    """Capture on iface (in netns) into out while the body runs (nothing when out is None)."""
    if not out:
        yield
        return
    check_can_capture(out)
    cmd = capture_cmd(iface, out, shutil.which("tcpdump") is not None)
    proc = subprocess.Popen(ns_prefix(netns) + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if cmd[0] == "tcpdump":
        time.sleep(START_S)
    else:
        proc.stdout.readline()  # READY once the sniffer runs (or EOF when it failed)
    if proc.poll() is not None:
        raise ValueError(f"--capture {out} on {iface}: {cmd[0]} exited: {(proc.stderr.read() or '').strip()[:200]}")
    print(f"capturing {iface} into {out} ({os.path.basename(cmd[0])}, pid {proc.pid})", flush=True)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def sniff_to(iface: str, out: str) -> int:
    """Capture every packet on iface into out (pcap via scapy's writer, SNAP_BYTES each, kernel timestamps) until
    SIGINT/SIGTERM, then until the socket has been quiet for QUIET_S (DRAIN_S at most); the packet count."""
    from scapy.utils import PcapWriter

    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind((iface, 0))
    sock.settimeout(QUIET_S)
    writer = PcapWriter(out, linktype=1, snaplen=SNAP_BYTES, sync=False)
    writer._write_header(None)  # write_packet() alone leaves out the file header
    stop: list[float] = []  # when SIGINT/SIGTERM came
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(time.monotonic()))
    print("READY", flush=True)
    n = 0
    while not (stop and time.monotonic() - stop[0] > DRAIN_S):
        try:
            data, anc, _, addr = sock.recvmsg(65535, 64)
        except TimeoutError:
            if stop:
                break
            continue
        except InterruptedError:
            continue
        if addr[3] not in LINK_TYPES:
            raise ValueError(f"--capture on {iface}: link type {addr[3]} is not Ethernet or loopback")
        if addr[3] == ARPHRD_LOOPBACK and addr[2] == PACKET_OUTGOING:
            continue  # loopback: each packet is seen again as incoming
        sec, nsec = _stamp(anc)
        writer.write_packet(data[:SNAP_BYTES], sec=sec, usec=nsec // 1000, caplen=min(len(data), SNAP_BYTES),
                            wirelen=len(data))
        n += 1
    writer.close()
    sock.close()
    return n


def _stamp(anc: list) -> tuple[int, int]:
    """(s, ns) of the kernel's receive timestamp (SO_TIMESTAMPNS), else now."""
    for level, kind, raw in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
            return struct.unpack("qq", raw[:16])
    t = time.time_ns()
    return t // 10**9, t % 10**9


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m channel.capture", description=__doc__.splitlines()[0])
    ap.add_argument("--iface", required=True, help="interface to capture on")
    ap.add_argument("--out", required=True, help="pcap file to write")
    args = ap.parse_args(argv)
    try:
        n = sniff_to(args.iface, args.out)
    except (OSError, ValueError) as e:
        print(f"python -m channel.capture: error: {e}", file=sys.stderr)
        return 2
    print(f"captured {n} packets on {args.iface} into {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
