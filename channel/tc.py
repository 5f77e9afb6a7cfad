"""Build `tc` qdisc commands as data (netem, tbf), plan a link with a no-netem fallback, and run them."""

from __future__ import annotations

import contextlib
import gzip
import math
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

Cmd = list[str]
Runner = Callable[..., "subprocess.CompletedProcess[str]"]

FRAME_BYTES = 1514  # one full Ethernet frame without FCS
TBF_BURST_S = 0.005  # burst holds 5 ms of traffic: above one timer tick at HZ=250 (4 ms)
TBF_MIN_BURST_BYTES = 2 * FRAME_BYTES  # never below two full frames
EMULATOR = "channel.emulator"  # where the user-space fallback lives


@dataclass(frozen=True)
class NetemSpec:
    """One direction of an emulated link, applied on a device's egress."""

    delay_ms: float = 0.0  # one-way added delay
    jitter_ms: float = 0.0  # delay jitter (netem's uniform/normal spread), <= delay_ms
    loss_pct: float = 0.0  # packet loss in percent, 0..100 (a PER of 0.01 is 1.0 here)
    rate_mbps: float | None = None  # egress rate cap in Mbit/s; None means unlimited
    limit_pkts: int = 1000  # netem queue length in packets

    def __post_init__(self) -> None:
        _check(math.isfinite(self.delay_ms) and self.delay_ms >= 0, f"delay_ms must be >= 0, got {self.delay_ms}")
        _check(math.isfinite(self.jitter_ms) and self.jitter_ms >= 0, f"jitter_ms must be >= 0, got {self.jitter_ms}")
        _check(self.jitter_ms <= self.delay_ms,
               f"jitter_ms ({self.jitter_ms}) must not exceed delay_ms ({self.delay_ms})")
        _check(0.0 <= self.loss_pct <= 100.0, f"loss_pct must be in [0, 100], got {self.loss_pct}")
        if self.rate_mbps is not None:
            _check(math.isfinite(self.rate_mbps) and self.rate_mbps > 0,
                   f"rate_mbps must be > 0 or None, got {self.rate_mbps}")
        _check(isinstance(self.limit_pkts, int) and self.limit_pkts > 0,
               f"limit_pkts must be a positive int, got {self.limit_pkts}")

    @property
    def has_impairment(self) -> bool:
        """True when delay, jitter or loss is non-zero (what tbf cannot do)."""
        return self.delay_ms > 0 or self.jitter_ms > 0 or self.loss_pct > 0


def _check(ok: bool, msg: str) -> None:
    if not ok:
        raise ValueError(msg)


def direction_specs(rtt_ms: float, jitter_ms: float, per: float, rate_up_mbps: float | None,
                    rate_down_mbps: float | None, limit_pkts: int = 1000) -> tuple[NetemSpec, NetemSpec]:
    """(uplink, downlink) specs: RTT and jitter split half per direction, PER (a fraction) applied to each."""
    _check(0.0 <= per <= 1.0, f"per must be a fraction in [0, 1], got {per}")
    _check(rtt_ms >= 0 and jitter_ms >= 0, f"rtt_ms and jitter_ms must be >= 0, got {rtt_ms}, {jitter_ms}")
    half = dict(delay_ms=rtt_ms / 2, jitter_ms=jitter_ms / 2, loss_pct=per * 100.0, limit_pkts=limit_pkts)
    return NetemSpec(rate_mbps=rate_up_mbps, **half), NetemSpec(rate_mbps=rate_down_mbps, **half)


def _num(x: float) -> str:
    """Plain decimal without exponent or trailing zeros: 20.0 -> '20', 0.25 -> '0.25'."""
    return f"{x:.6f}".rstrip("0").rstrip(".")


def ns_prefix(netns: str | None) -> Cmd:
    """`ip netns exec NS` when a namespace is given, else nothing."""
    return ["ip", "netns", "exec", netns] if netns else []


def netem_cmds(dev: str, spec: NetemSpec, netns: str | None = None) -> list[Cmd]:
    """`tc qdisc replace dev DEV root netem delay Xms [Yms] [loss Z%] [rate Rmbit] limit N`."""
    cmd = ns_prefix(netns) + ["tc", "qdisc", "replace", "dev", dev, "root", "netem",
                              "delay", f"{_num(spec.delay_ms)}ms"]
    if spec.jitter_ms > 0:
        cmd.append(f"{_num(spec.jitter_ms)}ms")
    if spec.loss_pct > 0:
        cmd += ["loss", f"{_num(spec.loss_pct)}%"]
    if spec.rate_mbps is not None:
        cmd += ["rate", f"{_num(spec.rate_mbps)}mbit"]
    return [cmd + ["limit", str(spec.limit_pkts)]]


def tbf_burst_bytes(rate_mbps: float) -> int:
    """Default tbf bucket: 5 ms of traffic at the rate, at least two full frames (3028 B)."""
    return max(TBF_MIN_BURST_BYTES, math.ceil(rate_mbps * 1e6 / 8 * TBF_BURST_S))


def tbf_cmds(dev: str, rate_mbps: float, burst_bytes: int | None = None, latency_ms: float = 50.0,
             netns: str | None = None) -> list[Cmd]:
    """`tc qdisc replace dev DEV root tbf rate Rmbit burst B latency Lms` (rate cap only)."""
    _check(rate_mbps > 0, f"rate_mbps must be > 0, got {rate_mbps}")
    _check(latency_ms > 0, f"latency_ms must be > 0, got {latency_ms}")
    burst = tbf_burst_bytes(rate_mbps) if burst_bytes is None else burst_bytes
    _check(burst > 0, f"burst_bytes must be > 0, got {burst}")
    return [ns_prefix(netns) + ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{_num(rate_mbps)}mbit",
                                "burst", str(burst), "latency", f"{_num(latency_ms)}ms"]]


def clear_cmds(dev: str, netns: str | None = None) -> list[Cmd]:
    """`tc qdisc del dev DEV root`: back to the device's default qdisc."""
    return [ns_prefix(netns) + ["tc", "qdisc", "del", "dev", dev, "root"]]


@dataclass(frozen=True)
class NetemCheck:
    """Whether the kernel has the netem qdisc, and how we know."""

    available: bool  # netem can be used
    reason: str  # human explanation of the verdict

    def __bool__(self) -> bool:
        return self.available


def netem_from_kernel_config(text: str) -> NetemCheck | None:
    """Read CONFIG_NET_SCH_NETEM out of a kernel config; None when the config does not mention it."""
    for line in text.splitlines():
        if line.startswith("CONFIG_NET_SCH_NETEM="):
            return NetemCheck(True, f"kernel config has {line.strip()}")
        if line.strip() == "# CONFIG_NET_SCH_NETEM is not set":
            return NetemCheck(False, "kernel has no netem qdisc (CONFIG_NET_SCH_NETEM is not set)")
    return None


def _static_netem_check() -> NetemCheck:
    """Without root: look at /proc/modules, the kernel config and the module tree."""
    modules = Path("/proc/modules")
    if modules.exists() and "sch_netem " in modules.read_text():
        return NetemCheck(True, "sch_netem is loaded (/proc/modules)")
    for cfg in (Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}")):
        if cfg.exists():
            with (gzip.open(cfg, "rt") if cfg.suffix == ".gz" else open(cfg)) as f:
                text = f.read()
            verdict = netem_from_kernel_config(text)
            if verdict is not None:
                return verdict
    if list(Path(f"/lib/modules/{os.uname().release}").glob("kernel/net/sched/sch_netem.ko*")):
        return NetemCheck(True, "sch_netem module is installed (/lib/modules)")
    return NetemCheck(False, "could not determine netem support (not root, no kernel config); assuming none")


def _probe_cmds(dev: str, netns: str | None) -> tuple[list[Cmd], list[Cmd]]:
    """Try a netem root qdisc on DEV, then remove it."""
    return netem_cmds(dev, NetemSpec(), netns), clear_cmds(dev, netns)


def _probe(dev: str, netns: str | None, run: Runner) -> NetemCheck:
    add, delete = _probe_cmds(dev, netns)
    res = run(add[0], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        err = (res.stderr or "").strip() or f"exit {res.returncode}"
        return NetemCheck(False, f"kernel has no netem qdisc: `{' '.join(add[0])}` failed: {err}")
    run(delete[0], capture_output=True, text=True, check=False)
    return NetemCheck(True, f"netem qdisc accepted on {dev}" + (f" in {netns}" if netns else ""))


def kernel_has_netem(dev: str | None = None, netns: str | None = None, run: Runner = subprocess.run,
                     is_root: bool | None = None) -> NetemCheck:
    """Detect netem by adding one on DEV (a project-made device: its root qdisc is replaced, then deleted).

    Without DEV, as root, the probe goes on `lo` of a scratch namespace `wisv-probe-<id>` that is
    created and deleted here; without root, the kernel config and module lists are read instead.
    """
    if dev is not None:
        return _probe(dev, netns, run)
    if not (os.geteuid() == 0 if is_root is None else is_root):
        return _static_netem_check()
    scratch = f"wisv-probe-{uuid.uuid4().hex[:6]}"
    made = run(["ip", "netns", "add", scratch], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        return _static_netem_check()
    try:
        return _probe("lo", scratch, run)
    finally:
        run(["ip", "netns", "del", scratch], capture_output=True, text=True, check=False)


@dataclass(frozen=True)
class LinkPlan:
    """What to apply on one device's egress, how to undo it, and what the kernel cannot do."""

    dev: str  # device whose egress is shaped
    netns: str | None  # namespace holding dev; None = current namespace
    spec: NetemSpec  # the wanted link
    use_netem: bool  # True: netem does everything; False: tbf (rate only) + user-space emulator
    apply_cmds: list[Cmd] = field(default_factory=list)  # run in order to shape
    cleanup_cmds: list[Cmd] = field(default_factory=list)  # run in order to undo apply_cmds
    userspace: tuple[str, ...] = ()  # spec fields left to the user-space emulator, e.g. ("delay_ms", "loss_pct")
    message: str = ""  # one line for the user

    @property
    def emulator_spec(self) -> NetemSpec | None:
        """The part the user-space emulator must add (no rate: tbf has it); None when nothing is left."""
        if not self.userspace:
            return None
        s = self.spec
        return NetemSpec(s.delay_ms, s.jitter_ms, s.loss_pct, None, s.limit_pkts)


def plan_link(spec: NetemSpec, dev: str, netns: str | None, have_netem: bool) -> LinkPlan:
    """Pure: netem for everything when the kernel has it, else tbf for the rate and the rest in user space."""
    where = f"{dev}" + (f" in {netns}" if netns else "")
    if have_netem:
        return LinkPlan(dev, netns, spec, True, netem_cmds(dev, spec, netns), clear_cmds(dev, netns),
                        message=f"netem on {where}: delay/jitter/loss/rate in the kernel")
    userspace = tuple(f for f in ("delay_ms", "jitter_ms", "loss_pct") if getattr(spec, f) > 0)
    apply = tbf_cmds(dev, spec.rate_mbps, netns=netns) if spec.rate_mbps is not None else []
    cleanup = clear_cmds(dev, netns) if apply else []
    rate = "rate via tbf" if apply else "no rate cap"
    rest = (f", {'/'.join(f.split('_')[0] for f in userspace)} via the user-space emulator ({EMULATOR})"
            if userspace else "")
    return LinkPlan(dev, netns, spec, False, apply, cleanup, userspace,
                    f"kernel has no netem qdisc on {where}: {rate}{rest}")


class CommandError(RuntimeError):
    """A tc/ip command failed; carries the argv and its stderr."""

    def __init__(self, cmd: Sequence[str], returncode: int, stderr: str) -> None:
        self.cmd, self.returncode, self.stderr = list(cmd), returncode, stderr.strip()
        super().__init__(f"command failed (exit {returncode}): {' '.join(cmd)}: {self.stderr or 'no stderr'}")


def format_cmd(cmd: Sequence[str]) -> str:
    return " ".join(cmd)


def run_cmds(cmds: Sequence[Cmd], dry_run: bool = False, runner: Runner = subprocess.run,
             echo: Callable[[str], None] | None = None) -> None:
    """Run each command in order (stop at the first failure); dry_run prints them and runs nothing."""
    for cmd in cmds:
        if dry_run or echo is not None:
            (echo or print)(("(dry run) " if dry_run else "+ ") + format_cmd(cmd))
        if dry_run:
            continue
        res = runner(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise CommandError(cmd, res.returncode, res.stderr or "")


def run_all(cmds: Sequence[Cmd], runner: Runner = subprocess.run, dry_run: bool = False,
            echo: Callable[[str], None] | None = None) -> list[CommandError]:
    """Run every command even if some fail (for cleanup); return the failures."""
    errors: list[CommandError] = []
    for cmd in cmds:
        try:
            run_cmds([cmd], dry_run=dry_run, runner=runner, echo=echo)
        except CommandError as err:
            errors.append(err)
    return errors


@contextlib.contextmanager
def applied(apply_cmds: Sequence[Cmd], cleanup_cmds: Sequence[Cmd], runner: Runner = subprocess.run,
            dry_run: bool = False, echo: Callable[[str], None] | None = None) -> Iterator[None]:
    """Apply on entry, always run cleanup in `finally`.

    Cleanup failures are printed to stderr; they are raised only when the body itself succeeded,
    so they never mask the original exception.
    """
    ok = False
    try:
        run_cmds(apply_cmds, dry_run=dry_run, runner=runner, echo=echo)
        yield
        ok = True
    finally:
        errors = run_all(cleanup_cmds, runner=runner, dry_run=dry_run, echo=echo)
        for err in errors:
            print(f"cleanup: {err}", file=sys.stderr)
        if errors and ok:
            raise errors[0]
