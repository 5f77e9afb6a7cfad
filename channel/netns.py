"""Two-namespace topology (UE and edge joined by a veth pair): commands as data, a root-only engine, and ping."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from channel.tc import Cmd, CommandError, Runner, run_all, run_cmds

PREFIX = "wisv"  # every namespace this project creates starts with this
IFNAMSIZ = 15  # longest Linux interface name
_ID_RE = re.compile(r"^[a-z0-9]{1,8}$")
_REPO_ROOT = str(Path(__file__).resolve().parents[1])
_OPEN: dict[str, tuple[NetnsTopology, Runner]] = {}  # topologies whose namespaces may exist, by short_id


def exec_prefix(ns: str) -> Cmd:
    """Prefix that runs a command inside namespace NS."""
    return ["ip", "netns", "exec", ns]


def new_short_id() -> str:
    return uuid.uuid4().hex[:6]


@dataclass(frozen=True)
class NetnsTopology:
    """UE namespace <-veth-> edge namespace; the UE side's egress is uplink, the edge side's is downlink."""

    short_id: str = field(default_factory=new_short_id)  # unique id in all names, [a-z0-9]{1,8}
    subnet: int = -1  # third octet of 10.77.<subnet>.0/30; -1 derives it from short_id
    ue_ns: str = field(init=False)  # "wisv-ue-<id>"
    edge_ns: str = field(init=False)  # "wisv-edge-<id>"
    ue_dev: str = field(init=False)  # veth end in the UE namespace, "wv<id>u"
    edge_dev: str = field(init=False)  # veth end in the edge namespace, "wv<id>e"
    ue_addr: str = field(init=False)  # "10.77.<subnet>.1"
    edge_addr: str = field(init=False)  # "10.77.<subnet>.2"
    prefix_len: int = field(init=False, default=30)  # one /30 per link

    def __post_init__(self) -> None:
        if not _ID_RE.match(self.short_id):
            raise ValueError(f"short_id must match [a-z0-9]{{1,8}}, got {self.short_id!r}")
        subnet = self.subnet if self.subnet >= 0 else int(self.short_id, 36) % 256
        if not 0 <= subnet <= 255:
            raise ValueError(f"subnet must be in [0, 255], got {self.subnet}")
        names = dict(subnet=subnet, ue_ns=f"{PREFIX}-ue-{self.short_id}", edge_ns=f"{PREFIX}-edge-{self.short_id}",
                     ue_dev=f"wv{self.short_id}u", edge_dev=f"wv{self.short_id}e",
                     ue_addr=f"10.77.{subnet}.1", edge_addr=f"10.77.{subnet}.2")
        for key, value in names.items():
            object.__setattr__(self, key, value)

    @property
    def namespaces(self) -> tuple[str, str]:
        return self.ue_ns, self.edge_ns

    def setup_cmds(self) -> list[Cmd]:
        """Create both namespaces, the veth pair directly inside them, addresses, and bring all up."""
        cmds = [["ip", "netns", "add", self.ue_ns], ["ip", "netns", "add", self.edge_ns],
                ["ip", "-n", self.ue_ns, "link", "add", self.ue_dev, "type", "veth",
                 "peer", "name", self.edge_dev, "netns", self.edge_ns]]
        for ns, dev, addr in ((self.ue_ns, self.ue_dev, self.ue_addr), (self.edge_ns, self.edge_dev, self.edge_addr)):
            cmds += [["ip", "-n", ns, "addr", "add", f"{addr}/{self.prefix_len}", "dev", dev],
                     ["ip", "-n", ns, "link", "set", "lo", "up"],
                     ["ip", "-n", ns, "link", "set", dev, "up"]]
        return cmds

    def teardown_cmds(self, namespaces: tuple[str, ...] | None = None) -> list[Cmd]:
        """Delete the namespaces (the veth pair goes with them); only those given, if given."""
        chosen = self.namespaces if namespaces is None else namespaces
        return [["ip", "netns", "del", ns] for ns in reversed(self.namespaces) if ns in chosen]


def require_root() -> None:
    """Raise PermissionError unless running as root with `ip` on PATH."""
    if os.geteuid() != 0:
        raise PermissionError("network namespaces need root: re-run with sudo (or use --dry-run to only print)")
    if shutil.which("ip") is None:
        raise PermissionError("`ip` (iproute2) not found on PATH")


def list_namespaces(runner: Runner = subprocess.run) -> set[str]:
    """Names from `ip netns list` (lines look like 'name (id: 3)')."""
    res = runner(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise CommandError(["ip", "netns", "list"], res.returncode, res.stderr or "")
    return {line.split()[0] for line in (res.stdout or "").splitlines() if line.strip()}


@contextlib.contextmanager
def topology(short_id: str | None = None, subnet: int = -1, runner: Runner = subprocess.run, dry_run: bool = False,
             echo: Callable[[str], None] | None = None) -> Iterator[NetnsTopology]:
    """Create the topology, yield it, always delete the namespaces this call created (in `finally`)."""
    topo = NetnsTopology(short_id or new_short_id(), subnet)
    if not dry_run:
        require_root()
        clash = set(topo.namespaces) & list_namespaces(runner)
        if clash:
            raise RuntimeError(f"namespaces already exist, refusing to touch them: {sorted(clash)}")
    created: list[str] = []
    if not dry_run:
        _OPEN[topo.short_id] = (topo, runner)
    try:
        for cmd in topo.setup_cmds():
            run_cmds([cmd], dry_run=dry_run, runner=runner, echo=echo)
            if cmd[:3] == ["ip", "netns", "add"]:
                created.append(cmd[3])
        yield topo
    finally:
        ours = created if dry_run else _existing(topo, runner, created)
        for err in run_all(topo.teardown_cmds(tuple(ours)), runner=runner, dry_run=dry_run, echo=echo):
            print(f"teardown: {err}", file=sys.stderr)
        _OPEN.pop(topo.short_id, None)


def _existing(topo: NetnsTopology, runner: Runner, created: list[str]) -> list[str]:
    """The topology's namespaces that exist now (none did before it: see topology), and those it created; an
    interruption between creating one and noting it leaves nothing behind."""
    try:
        return sorted(set(created) | (set(topo.namespaces) & list_namespaces(runner)))
    except (CommandError, OSError):
        return created


def open_namespaces() -> list[str]:
    """The namespaces of the topologies open now (created, or about to be, and not yet torn down)."""
    return [ns for topo, _ in _OPEN.values() for ns in topo.namespaces]


def teardown_open() -> list[str]:
    """Delete the namespaces of every topology still open (an interrupted run's); returns their names."""
    removed = []
    for short_id, (topo, runner) in list(_OPEN.items()):
        ours = _existing(topo, runner, [])
        for err in run_all(topo.teardown_cmds(tuple(ours)), runner=runner):
            print(f"teardown: {err}", file=sys.stderr)
        removed += ours
        _OPEN.pop(short_id, None)
    return removed


def ping_cmd(ns: str, addr: str, count: int = 2, timeout_s: float = 1.0, have_ping: bool | None = None) -> Cmd:
    """Ping ADDR from inside NS: iputils `ping` if present, else this module's raw-socket ICMP echo."""
    have_ping = shutil.which("ping") is not None if have_ping is None else have_ping
    if have_ping:
        return exec_prefix(ns) + ["ping", "-n", "-c", str(count), "-i", "0.2", "-W", str(max(1, round(timeout_s))),
                                  addr]
    code = (f"import sys; sys.path.insert(0, {_REPO_ROOT!r}); "
            "from channel.netns import icmp_main; icmp_main(sys.argv[1:])")
    return exec_prefix(ns) + [sys.executable, "-c", code, addr, str(count), str(timeout_s)]


def parse_ping_rtts(text: str) -> list[float]:
    """RTTs in ms from ping-style lines ('... time=0.042 ms')."""
    return [float(m) for m in re.findall(r"time[=<]([\d.]+) ?ms", text)]


def ping_rtts(ns: str, addr: str, count: int = 2, timeout_s: float = 1.0,
              runner: Runner = subprocess.run) -> list[float]:
    """Measured RTTs (ms) of the replies; an empty list when none came back."""
    res = runner(ping_cmd(ns, addr, count, timeout_s), capture_output=True, text=True, check=False,
                 timeout=count * (timeout_s + 0.5) + 5)
    return parse_ping_rtts(res.stdout or "")


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    return ~(total + (total >> 16)) & 0xFFFF


def _echo_once(sock: socket.socket, addr: str, ident: int, seq: int, timeout_s: float) -> float | None:
    """Send one ICMP echo request, return the RTT in ms or None on timeout."""
    body = struct.pack("!HH", ident, seq) + b"wisv-ping" * 6
    sock.sendto(struct.pack("!BBH", 8, 0, _checksum(b"\x08\x00\x00\x00" + body)) + body, (addr, 0))
    t0 = time.perf_counter()
    deadline = t0 + timeout_s
    while (left := deadline - time.perf_counter()) > 0:
        sock.settimeout(left)
        try:
            pkt, _ = sock.recvfrom(2048)
        except TimeoutError:
            return None
        icmp = pkt[(pkt[0] & 0x0F) * 4:]
        if len(icmp) >= 8 and icmp[0] == 0 and struct.unpack("!HH", icmp[4:8]) == (ident, seq):
            return (time.perf_counter() - t0) * 1e3
    return None


def icmp_main(argv: list[str]) -> None:
    """`ADDR COUNT TIMEOUT_S`: ping-like output, exit 1 when no reply came back (needs root)."""
    addr, count, timeout_s = argv[0], int(argv[1]), float(argv[2])
    ident, replies = os.getpid() & 0xFFFF, 0
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as sock:
        for seq in range(1, count + 1):
            rtt = _echo_once(sock, addr, ident, seq, timeout_s)
            if rtt is not None:
                replies += 1
                print(f"reply from {addr}: icmp_seq={seq} time={rtt:.3f} ms", flush=True)
            if seq < count:
                time.sleep(0.1)
    print(f"{count} packets transmitted, {replies} received")
    sys.exit(0 if replies else 1)
