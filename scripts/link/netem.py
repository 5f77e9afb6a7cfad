"""Emulate a UE<->edge wireless link with tc: netem where the kernel has it, else tbf plus the user-space emulator.

Usage:
    # two namespaces (wisv-ue-<id>, wisv-edge-<id>) joined by a veth, shaped both ways, ping, hold 60 s
    sudo python -m scripts.link.netem --rate-mbps 20 --rtt-ms 40 --jitter-ms 2 --per 0.01 --hold-s 60
    # only print every command (no root needed, nothing is touched)
    python -m scripts.link.netem --rate-up-mbps 5 --rate-down-mbps 50 --rtt-ms 40 --dry-run
    # replay a CSI trace as tc changes on its row times (print the schedule only with --dry-run)
    sudo python -m scripts.link.netem --csi-trace scripts/link/traces/alternating_10s.csv --hold-s 40 --trace-loop
    # shape one existing device's egress (e.g. on a real host), whole RTT on this side
    sudo python -m scripts.link.netem --apply-to-dev eth1 --rtt-ms 40 --per 0.01 --rate-mbps 20 --hold-s -1

RTT and jitter are round-trip figures, split half per direction (the UE side's egress is uplink, the edge
side's egress is downlink); --per is a fraction applied to each direction. With --apply-to-dev the whole
RTT goes on that device unless --half-rtt (use it when the peer host shapes its own egress too), and
--side picks the rate (ue: uplink, edge: downlink). --hold-s -1 holds until Ctrl-C. Everything applied
is removed on exit, Ctrl-C included.

Exit codes: 0 ok (Ctrl-C during the hold included); 1 a tc/ip command failed; 2 bad arguments;
3 not root; 4 the ping check got no reply; 130 interrupted before the hold; 143 SIGTERM (after cleanup).
"""

from __future__ import annotations

import contextlib
import math
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field

import config
from channel.csitrace import load_trace
from channel.netns import NetnsTopology, ping_rtts, require_root, topology
from channel.tc import (
    CommandError,
    LinkPlan,
    NetemSpec,
    applied,
    clear_cmds,
    direction_specs,
    kernel_has_netem,
    plan_link,
)
from channel.tcschedule import Side, play, schedule

EXIT_OK, EXIT_CMD, EXIT_USAGE, EXIT_ROOT, EXIT_PING, EXIT_INTERRUPT, EXIT_TERM = 0, 1, 2, 3, 4, 130, 143


@dataclass
class NetemLinkConfig:
    """One emulated link: its figures, and where and how it is applied."""

    rate_mbps: float | None = None  # rate both ways, Mbit/s (None: unlimited)
    rate_up_mbps: float | None = None  # uplink rate, Mbit/s; overrides --rate-mbps
    rate_down_mbps: float | None = None  # downlink rate, Mbit/s; overrides --rate-mbps
    rtt_ms: float = 0.0  # added round-trip time, ms, half per direction
    jitter_ms: float = 0.0  # round-trip jitter, ms, half per direction
    per: float = 0.0  # packet error rate per direction, a fraction
    limit_pkts: int = 1000  # netem queue length, packets
    dry_run: bool = False  # print the commands only; no root needed
    no_netem: bool = False  # plan as if the kernel had no netem
    ping_count: int = 3  # ping packets UE->edge after applying; 0 = skip
    hold_s: float = 0.0  # keep the link this long, s; -1 = until Ctrl-C
    apply_to_dev: str | None = None  # shape this existing device instead of making namespaces
    netns: str | None = None  # namespace holding --apply-to-dev (None: this one)
    side: str = field(default="ue", metadata={"choices": ("ue", "edge")})  # with --apply-to-dev: which rate to use
    half_rtt: bool = False  # with --apply-to-dev: put only half the RTT here
    csi_trace: str | None = None  # CSV trace (channel/csitrace.py) applied as a schedule of tc changes over time
    trace_loop: bool = False  # repeat --csi-trace for the whole --hold-s


def parse_args(argv: list[str] | None = None) -> NetemLinkConfig:
    return config.parse(NetemLinkConfig, argv, prog="python -m scripts.link.netem", description=__doc__.split("\n")[0])


def link_specs(args: NetemLinkConfig) -> tuple[NetemSpec, NetemSpec]:
    """(uplink, downlink) specs from the arguments (raises ValueError on bad values)."""
    up = args.rate_up_mbps if args.rate_up_mbps is not None else args.rate_mbps
    down = args.rate_down_mbps if args.rate_down_mbps is not None else args.rate_mbps
    return direction_specs(args.rtt_ms, args.jitter_ms, args.per, up, down, args.limit_pkts)


def single_dev_spec(args: NetemLinkConfig) -> NetemSpec:
    """Spec for --apply-to-dev: the chosen side's rate, whole RTT unless --half-rtt."""
    up, down = link_specs(args)
    spec = up if args.side == "ue" else down
    scale = 1.0 if args.half_rtt else 2.0
    return NetemSpec(spec.delay_ms * scale, spec.jitter_ms * scale, spec.loss_pct, spec.rate_mbps, spec.limit_pkts)


def show_plan(name: str, plan: LinkPlan) -> None:
    print(f"[{name}] {plan.message}")
    if plan.emulator_spec is not None:
        e = plan.emulator_spec
        print(f"[{name}] user-space emulator must add: delay {e.delay_ms} ms, jitter {e.jitter_ms} ms, "
              f"loss {e.loss_pct} %")


def detect(dev: str, netns: str | None, args: NetemLinkConfig) -> bool:
    """netem availability (probed on DEV), printed with its reason; dry runs assume netem unless --no-netem."""
    if args.no_netem:
        print("netem: not used (--no-netem)")
        return False
    if args.dry_run:
        print("netem: not probed in a dry run; showing the netem plan (--no-netem shows the fallback)")
        return True
    check = kernel_has_netem(dev=dev, netns=netns)
    print(f"netem: {'yes' if check else 'no'} ({check.reason})")
    return check.available


def ping_check(topo: NetnsTopology, count: int, args: NetemLinkConfig, partial: bool) -> int:
    """Ping UE -> edge and print the RTT (only kernel-shaped parts show up in it)."""
    rtts = ping_rtts(topo.ue_ns, topo.edge_addr, count=count, timeout_s=1.0 + (args.rtt_ms + args.jitter_ms) / 1e3)
    if not rtts:
        print(f"ping {topo.ue_ns} -> {topo.edge_addr}: no reply", file=sys.stderr)
        return EXIT_PING
    print(f"ping {topo.ue_ns} -> {topo.edge_addr}: {len(rtts)}/{count} replies, "
          f"RTT median {statistics.median(rtts):.3f} ms (min {min(rtts):.3f}, max {max(rtts):.3f})"
          + ("; excludes the delay left to the user-space emulator" if partial else ""))
    return EXIT_OK


def hold(hold_s: float) -> None:
    """Sleep hold_s seconds (forever when negative); Ctrl-C ends the hold normally."""
    if hold_s == 0:
        return
    print(f"holding {'until Ctrl-C' if hold_s < 0 else f'{hold_s:g} s'} ...", flush=True)
    try:
        time.sleep(hold_s if hold_s > 0 else 10**9)
    except KeyboardInterrupt:
        print("interrupted: cleaning up")


def run_topology(args: NetemLinkConfig) -> int:
    up, down = link_specs(args)
    with topology(dry_run=args.dry_run, echo=print) as topo:
        print(f"topology: {topo.ue_ns} ({topo.ue_dev} {topo.ue_addr}) <-> "
              f"{topo.edge_ns} ({topo.edge_dev} {topo.edge_addr})")
        have = detect(topo.ue_dev, topo.ue_ns, args)
        if args.csi_trace:
            sides = [Side(topo.ue_dev, topo.ue_ns, "up"), Side(topo.edge_dev, topo.edge_ns, "down")]
            return play_trace(args, sides, have)
        plans = [("uplink", plan_link(up, topo.ue_dev, topo.ue_ns, have)),
                 ("downlink", plan_link(down, topo.edge_dev, topo.edge_ns, have))]
        with contextlib.ExitStack() as stack:
            for name, plan in plans:
                show_plan(name, plan)
                stack.enter_context(applied(plan.apply_cmds, plan.cleanup_cmds, dry_run=args.dry_run, echo=print))
            code = EXIT_OK if args.dry_run or args.ping_count <= 0 else ping_check(
                topo, args.ping_count, args, any(p.userspace for _, p in plans))
            hold(args.hold_s)
    return code


def run_single(args: NetemLinkConfig) -> int:
    if not args.dry_run:
        require_root()
    if args.csi_trace:
        have = detect(args.apply_to_dev, args.netns, args)
        return play_trace(args, [Side(args.apply_to_dev, args.netns, "up" if args.side == "ue" else "down")], have)
    spec = single_dev_spec(args)
    plan = plan_link(spec, args.apply_to_dev, args.netns, detect(args.apply_to_dev, args.netns, args))
    show_plan(args.apply_to_dev, plan)
    with applied(plan.apply_cmds, plan.cleanup_cmds, dry_run=args.dry_run, echo=print):
        hold(args.hold_s)
    return EXIT_OK


def play_trace(args: NetemLinkConfig, sides: list[Side], have_netem: bool) -> int:
    """Apply --csi-trace as tc changes on its row times (for --hold-s, else one trace period); then clear."""
    trace = load_trace(args.csi_trace, loop=args.trace_loop)
    duration = args.hold_s if args.hold_s > 0 else trace.period_s
    if not math.isfinite(duration):
        raise ValueError(f"{args.csi_trace}: a one-row trace has no length: give --hold-s")
    steps = schedule(trace, sides, duration, have_netem, args.jitter_ms, args.limit_pkts)
    print(f"trace {args.csi_trace}: {len(steps)} tc changes over {duration:g} s"
          + ("" if have_netem else "; without netem only the rates (tbf): replay RTT/PER in channel.emulator"))
    cleanup = [c for s in sides for c in clear_cmds(s.dev, s.netns)]
    with applied([], cleanup, dry_run=args.dry_run, echo=print):
        play(steps, have_netem, dry_run=args.dry_run)
        if not args.dry_run:
            time.sleep(max(0.0, duration - steps[-1].t_s))
    return EXIT_OK


def run(args: NetemLinkConfig) -> int:
    """Validate, then shape either the two-namespace topology or one device; always clean up."""
    try:
        link_specs(args)
        if args.csi_trace:
            load_trace(args.csi_trace)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return run_single(args) if args.apply_to_dev else run_topology(args)
    except PermissionError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ROOT
    except CommandError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CMD
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPT


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(EXIT_TERM)  # unwinds through every `finally`, so cleanup still runs


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
