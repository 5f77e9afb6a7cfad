"""Where a run's processes live and how they are linked: loopback + in-process emulator, two netns + tc, or an
edge already serving on another host (the real link, or the in-process emulator in front of it).

Every placement starts the edge (except ``remote``), sets up the link, and yields a ``Site``: the endpoint UEs
connect to, the command prefix that puts a UE in its place, when the link's trace clock started, and whether the
link is real (UEs then record the CSI they measure).  Everything is torn down in ``finally``.
"""
from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import config
from channel.emulator import EmulatorConfig, LinkEmulator, parse_hostport
from channel.netns import exec_prefix, topology
from channel.tc import applied, direction_specs, kernel_has_netem, plan_link
from testbed.live.orchestrate.procs import Child

EDGE_PORT = 5555  # edge port inside its namespace
EMULATOR_PORT = 5601  # emulator port on the UE namespace's loopback


@dataclass
class Site:
    """What UEs need to join a running edge."""

    connect: str  # endpoint UEs connect to
    t0_epoch_s: float  # wall-clock start of the link (trace time 0)
    ue_prefix: list[str] = field(default_factory=list)  # command prefix placing a UE (e.g. ip netns exec)
    notes: list[str] = field(default_factory=list)  # how the link is emulated, for the log
    measured: bool = False  # a real, unemulated link: UEs record the CSI they measure as the CSI in force
    edge: Child | None = None  # the edge process the run started (watched while the UEs run; None: a remote edge)


@contextmanager
def local(cfg, out: Path, edge_args: list[str]) -> Iterator[Site]:
    """Edge on loopback, the user-space emulator in this process."""
    edge = Child("edge", edge_args + ["--bind", "tcp://127.0.0.1:0"], out / "edge.log")
    try:
        endpoint = edge.wait_for("READY", 300)
        if not cfg.link.emulated:
            yield Site(endpoint, time.time(), notes=["no link emulation: the UE connects straight to the edge"],
                       edge=edge)
            return
        with LinkEmulator(cfg.link.emulator_config(int(endpoint.rsplit(":", 1)[1]))) as emu:
            yield Site(emu.endpoint, emu.t0_epoch_s, notes=["user-space emulator on loopback"], edge=edge)
    finally:
        edge.stop()


@contextmanager
def remote(cfg, out: Path, edge_args: list[str]) -> Iterator[Site]:
    """An edge already serving at ``cfg.remote_edge``: UEs connect to it over the real link, measuring its CSI, or
    through the user-space emulator on this host when the run emulates a link (``edge_args`` unused)."""
    host, port = parse_hostport(cfg.remote_edge.removeprefix("tcp://"))
    if not cfg.link.emulated:
        yield Site(cfg.remote_edge, time.time(), measured=True,
                   notes=[f"remote edge {cfg.remote_edge}: the real link, no emulation; the UEs record the CSI they "
                          "measure (RTT from their handshakes, rates from their probes)"])
        return
    with LinkEmulator(cfg.link.emulator_config(port, target_host=host)) as emu:
        yield Site(emu.endpoint, emu.t0_epoch_s,
                   notes=[f"user-space emulator on this host in front of the remote edge {cfg.remote_edge}"])


@contextmanager
def netns(cfg, out: Path, edge_args: list[str]) -> Iterator[Site]:
    """Edge and UEs in two namespaces joined by a veth; netem or tbf on the veth, the rest in user space (a CSI
    trace or outages: all of it in user space, in the UE namespace)."""
    link = cfg.link
    with ExitStack() as stack:
        topo = stack.enter_context(topology())
        userspace = bool(link.csi_trace or link.outages)  # a trace or outages: all in user space, rate included
        plans = [] if userspace else _plans(link, topo)
        stack.enter_context(applied([c for p in plans for c in p.apply_cmds],
                                    [c for p in plans for c in p.cleanup_cmds]))
        private = [] if "--auth" in edge_args else ["--insecure"]  # the veth joins only this run's namespaces
        edge = Child("edge", edge_args + ["--bind", f"tcp://{topo.edge_addr}:{EDGE_PORT}", *private], out / "edge.log",
                     prefix=exec_prefix(topo.edge_ns))
        stack.callback(edge.stop)
        edge.wait_for("READY", 300)
        connect, t0 = f"tcp://{topo.edge_addr}:{EDGE_PORT}", time.time()
        if userspace or any(p.userspace for p in plans):
            emu = Child("emulator", _emulator_args(link, topo.edge_addr, with_rate=userspace), out / "emulator.log",
                        prefix=exec_prefix(topo.ue_ns))
            stack.callback(emu.stop)
            line = emu.wait_for("linkemu:", 60)
            connect, t0 = f"tcp://127.0.0.1:{EMULATOR_PORT}", _t0_of(line) or time.time()
        what = f"CSI trace {link.csi_trace}" if link.csi_trace else f"the link with outages {link.outages}"
        notes = [p.message for p in plans] or [f"{what} emulated by the user-space emulator in the UE namespace "
                                               "(rate, delay, loss, outages; no tc on the veth)"]
        yield Site(connect, t0, exec_prefix(topo.ue_ns), notes, edge=edge)


def _plans(link, topo) -> list:
    """tc plans of both veth ends: netem where the kernel has it, else tbf plus the user-space emulator."""
    have = bool(kernel_has_netem(dev=topo.ue_dev, netns=topo.ue_ns))
    up, down = direction_specs(link.rtt_ms, link.jitter_ms, link.per, link.rate_up_mbps or None,
                               link.rate_down_mbps or None)
    return [plan_link(up, topo.ue_dev, topo.ue_ns, have), plan_link(down, topo.edge_dev, topo.edge_ns, have)]


def _emulator_args(link, edge_addr: str, with_rate: bool = False) -> list[str]:
    """Delay, jitter, loss and outages in user space (the rate is on the veth via tbf, unless ``with_rate``); with a
    CSI trace, the whole trace."""
    rates = {"rate_up_mbps": link.rate_up_mbps or math.inf, "rate_down_mbps": link.rate_down_mbps or math.inf} \
        if with_rate and not link.csi_trace else {}
    emu = EmulatorConfig(forward=f"{edge_addr}:{EDGE_PORT}", listen=f"127.0.0.1:{EMULATOR_PORT}", rtt_ms=link.rtt_ms,
                         jitter_ms=link.jitter_ms, per=link.per, seed=link.seed, host_overhead_ms=link.host_overhead_ms,
                         csi_trace=str(Path(link.csi_trace).resolve()) if link.csi_trace else None,
                         outages=link.outages, **rates)
    return ["channel.emulator", *config.to_argv(emu)]


def _t0_of(line: str) -> float | None:
    """The trace start the emulator reports in its 'linkemu:' line."""
    m = re.search(r"t0_epoch_s=([0-9.]+)", line)
    return float(m.group(1)) if m else None
