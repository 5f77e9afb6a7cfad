"""A CSI trace as a schedule of `tc` changes over time (pure), and a runner that applies it on the clock.

Each trace row becomes one step at its start time: on the UE side's egress (uplink) and the edge side's (downlink),
``tc qdisc replace`` with the row's rate, half its RTT, its PER (netem), or, without netem, its rate only (tbf);
then the RTT and PER are the user-space emulator's job (``python -m channel.emulator --csi-trace``).  An outage row
is netem ``loss 100%``; tbf cannot stop a link, so without netem an outage row keeps its rate (the plan says so).
Unlimited rates clear the rate (netem without ``rate``; without netem a plain pfifo root qdisc).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from channel.csi import CSI
from channel.csitrace import CSITrace
from channel.tc import Cmd, NetemSpec, netem_cmds, ns_prefix, run_cmds, tbf_cmds


@dataclass(frozen=True)
class Side:
    """One shaped device: its egress carries one direction."""

    dev: str  # device name
    netns: str | None  # namespace holding it (None: this one)
    direction: str  # 'up' (UE side) or 'down' (edge side)


@dataclass(frozen=True)
class Step:
    """What to run at t_s seconds from the schedule's start."""

    t_s: float  # when, s from the start
    csi: CSI  # the CSI the step sets
    outage: bool  # nothing should pass until the next step
    cmds: tuple[tuple[str, ...], ...]  # tc commands, in order


def row_times(trace: CSITrace, duration_s: float) -> list[tuple[float, int]]:
    """(time, row index) of every row start within [0, duration_s), the trace repeated when it loops."""
    once = [(t, i) for i, t in enumerate(trace.t_s) if t < duration_s]
    if not (trace.loop and math.isfinite(trace.period_s)):
        return once
    period = trace.period_s
    return [(k * period + t, i) for k in range(math.ceil(duration_s / period)) for i, t in enumerate(trace.t_s)
            if k * period + t < duration_s]


def side_cmds(side: Side, csi: CSI, outage: bool, jitter_ms: float, have_netem: bool, limit_pkts: int) -> list[Cmd]:
    """The commands that set one side to csi (see the module docstring)."""
    rate = csi.rate_up_mbps if side.direction == "up" else csi.rate_down_mbps
    rate_mbps = rate if math.isfinite(rate) else None
    if have_netem:
        per = 1.0 if outage else (csi.per_up if side.direction == "up" else csi.per_down)
        spec = NetemSpec(csi.rtt_ms / 2, min(jitter_ms / 2, csi.rtt_ms / 2), per * 100.0, rate_mbps, limit_pkts)
        return netem_cmds(side.dev, spec, side.netns)
    if rate_mbps is None:
        return [ns_prefix(side.netns) + ["tc", "qdisc", "replace", "dev", side.dev, "root", "pfifo", "limit",
                                         str(limit_pkts)]]
    return tbf_cmds(side.dev, rate_mbps, netns=side.netns)


def schedule(trace: CSITrace, sides: list[Side], duration_s: float, have_netem: bool, jitter_ms: float = 0.0,
             limit_pkts: int = 1000) -> list[Step]:
    """One Step per trace row start within duration_s (repeats of a looping trace included)."""
    if not duration_s > 0:
        raise ValueError(f"duration_s must be > 0, got {duration_s}")
    steps = []
    for t, i in row_times(trace, duration_s):
        csi = trace.csis[i]
        outage = trace.outages.overlap_s(t, t + 1e-6) > 0
        cmds = [tuple(c) for s in sides for c in side_cmds(s, csi, outage, jitter_ms, have_netem, limit_pkts)]
        steps.append(Step(t, csi, outage, tuple(cmds)))
    return steps


def describe(step: Step, have_netem: bool) -> str:
    """One line: the step's time and CSI."""
    c = step.csi
    what = "outage (netem loss 100%)" if step.outage and have_netem else \
        "outage row: tbf cannot stop the link, rate kept" if step.outage else ""
    return (f"t={step.t_s:.3f} s: up {c.rate_up_mbps:g} / down {c.rate_down_mbps:g} Mbit/s, RTT {c.rtt_ms:g} ms, "
            f"PER {c.per_up:g}/{c.per_down:g}" + (f"; {what}" if what else ""))


def play(steps: list[Step], have_netem: bool, dry_run: bool = False, echo: Callable[[str], None] = print,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
    """Run each step's commands at its time (a dry run prints them at once, without waiting)."""
    t0 = clock()
    for step in steps:
        if not dry_run:
            sleep(max(0.0, step.t_s - (clock() - t0)))
        echo(describe(step, have_netem))
        run_cmds([list(c) for c in step.cmds], dry_run=dry_run, echo=echo)
