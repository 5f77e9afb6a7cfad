"""`python -m channel.trace`: convert links into CSI traces (a capture, a run, Mahimahi files) and back to Mahimahi.

Bad input (a truncated capture, a decreasing Mahimahi time, an empty run directory) is one line naming the file
and the line or packet, and exit 2.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import config
from channel import fromrun, mahimahi, pcap
from channel.csitrace import CSITrace, load_trace, save_trace

PROG = "python -m channel.trace"
POS = {"positional": True}


@dataclass
class FromMahimahi:
    """Read an uplink and a downlink Mahimahi trace into a CSI trace (rates only; RTT and PER given here)."""

    up: str = field(default="", metadata=POS)  # uplink Mahimahi trace (one delivery time in ms per line)
    down: str = field(default="", metadata=POS)  # downlink Mahimahi trace
    rtt_ms: float = field(default=0.0, metadata={"min": 0})  # RTT of every row, ms (Mahimahi carries none)
    per: float = field(default=0.0, metadata={"min": 0, "below": 1})  # PER of every row, both ways
    window_s: float = field(default=1.0, metadata={"min": 0.001})  # one row per window, s
    out: str = ""  # CSV trace to write


@dataclass
class ToMahimahi:
    """Write a CSI trace as uplink and downlink Mahimahi traces for `mm-link` (rates only)."""

    trace: str = field(default="", metadata=POS)  # CSV trace (channel/csitrace.py format)
    out_dir: str = ""  # directory for <name>.up and <name>.down
    duration_s: float | None = field(default=None, metadata={"above": 0})  # span written, s (default: the period)


@dataclass
class FromRun:
    """Turn a testbed.run directory's per-round records into a CSI trace."""

    run_dir: str = field(default="", metadata=POS)  # a testbed.run --out directory
    source: str = field(default="estimate", metadata={
        "choices": fromrun.SOURCES})  # link: the emulated link's CSI; estimate: the UE's own measurement
    window_s: float = field(default=1.0, metadata={"above": 0})  # one row per window with rounds, s
    out: str = ""  # CSV trace to write


@dataclass
class FromPcap:
    """Turn a packet capture of a UE-edge link into a CSI trace (rate, RTT, PER and outages per window)."""

    capture: str = field(default="", metadata=POS)  # pcap file (tcpdump -w, or --capture of a UE or an edge)
    ue: str = ""  # the UE's address, IP or IP:PORT (a port tells flows apart on loopback)
    edge: str = ""  # the edge's address, IP or IP:PORT
    window_s: float = field(default=1.0, metadata={"above": 0})  # one row per window, s
    min_pairs: int = field(default=8, metadata={"min": 1})  # back-to-back segment pairs for a window's rate
    windows_out: str = ""  # also write what each window measured (NaN: not measurable) to this CSV
    out: str = ""  # CSV trace to write


def _need(value: str, flag: str) -> str:
    if not value:
        raise ValueError(f"give {flag}")
    return value


def _write(trace: CSITrace, out: str) -> None:
    save_trace(trace, _need(out, "--out FILE.csv"))
    load_trace(out)  # what was written reads back
    print(f"wrote {out}: {len(trace)} rows over {trace.t_s[-1]:g} s" +
          (f", {len(trace.outage_spans)} outages" if trace.outage_spans else ""))


def from_mahimahi(cfg: FromMahimahi) -> None:
    up, down = mahimahi.read_mahimahi(_need(cfg.up, "UP")), mahimahi.read_mahimahi(_need(cfg.down, "DOWN"))
    _write(mahimahi.mahimahi_to_trace(up, down, cfg.rtt_ms, cfg.window_s, cfg.per), cfg.out)


def to_mahimahi(cfg: ToMahimahi) -> None:
    trace = load_trace(_need(cfg.trace, "TRACE"))
    out = Path(_need(cfg.out_dir, "--out-dir DIR"))
    out.mkdir(parents=True, exist_ok=True)
    duration = mahimahi.trace_duration_s(trace, cfg.duration_s)
    for d in ("up", "down"):
        times = mahimahi.trace_to_mahimahi(trace, d, duration)
        path = out / f"{Path(cfg.trace).stem}.{d}"
        path.write_text(mahimahi.format_mahimahi(times))
        print(f"wrote {path}: {len(times)} packets over {times[-1]} ms")
    print("Mahimahi carries rates only: give the RTT to mm-delay and the loss to mm-loss")


def from_run(cfg: FromRun) -> None:
    run_cfg, rounds = fromrun.read_run(_need(cfg.run_dir, "RUN_DIR"))
    _write(fromrun.run_to_trace(run_cfg, rounds, cfg.source, cfg.window_s, cfg.run_dir), cfg.out)


def from_pcap(cfg: FromPcap) -> None:
    trace, stats = pcap.pcap_to_trace(_need(cfg.capture, "CAPTURE"), _need(cfg.ue, "--ue ADDR"),
                                      _need(cfg.edge, "--edge ADDR"), cfg.window_s, cfg.min_pairs)
    _write(trace, cfg.out)
    print(pcap.measured_line(stats))
    if cfg.windows_out:
        pcap.stats_frame(stats, cfg.window_s).to_csv(cfg.windows_out, index=False)
        print(f"wrote {cfg.windows_out}: what each window measured")


COMMANDS = {"from-pcap": (FromPcap, from_pcap), "from-mahimahi": (FromMahimahi, from_mahimahi),
            "to-mahimahi": (ToMahimahi, to_mahimahi),
            "from-run": (FromRun, from_run)}


def main(argv: list[str] | None = None) -> int:
    return config.run_subcommand(PROG, __doc__.splitlines()[0], COMMANDS, argv,
                                 errors=(ValueError, FileNotFoundError, IsADirectoryError))


if __name__ == "__main__":
    import sys

    sys.exit(main())
