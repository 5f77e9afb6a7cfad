"""From the field to the bench, as a new user would: capture a run over a shaped link, convert it, replay it.

``sudo python -m scripts.link.field_to_bench --out DIR`` (root):

1. makes two namespaces joined by a veth and shapes it with a looping rate step (``--high-mbps`` for
   ``--step-s``, then ``--low-mbps``; tc tbf, applied by channel/tcschedule.py: the kernel here has no netem);
2. runs ``testbed.serve`` in the edge namespace and ``testbed.ue --capture DIR/field.pcap`` (``--prompts``
   prompts) in the UE namespace: the UE is on a "real" link, it knows nothing of the shaping;
3. converts the capture (``python -m channel.trace from-pcap``) and the UE's records (``from-run --source
   estimate``) into traces;
4. replays each with ``testbed.run --csi-trace`` on loopback, through the user-space emulator;
5. prints the original and the replays' summaries side by side (and writes DIR/side_by_side.csv).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd

from channel.csi import CSI
from channel.csitrace import CSITrace, save_trace
from channel.netns import exec_prefix, topology
from channel.tc import clear_cmds, run_all
from channel.tcschedule import Side, play, schedule

PORT = 5555
COLUMNS = ["prompts", "aal", "rounds_per_prompt", "latency_s", "throughput_tok_s", "t_comm_s_mean", "uplink_bytes",
           "downlink_bytes"]


class _Stopped(Exception):
    pass


def shape(topo, trace: CSITrace, duration_s: float, stop: threading.Event) -> threading.Thread:
    """Play the trace on the veth (tbf) in a daemon thread until stop is set."""
    sides = [Side(topo.ue_dev, topo.ue_ns, "up"), Side(topo.edge_dev, topo.edge_ns, "down")]
    steps = schedule(trace, sides, duration_s, have_netem=False)

    def sleep(s: float) -> None:
        if stop.wait(s):
            raise _Stopped

    def body() -> None:
        try:
            play(steps, False, echo=lambda line: print(f"[link] {line}", flush=True) if line.startswith("t=") else None,
                 sleep=sleep)
        except _Stopped:
            pass

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


def field_run(out: Path, args: argparse.Namespace) -> None:
    """Steps 1-2: the captured run over the shaped namespace link."""
    py = [sys.executable, "-m"]
    high, low = CSI.symmetric(args.high_mbps, 0.0), CSI.symmetric(args.low_mbps, 0.0)
    trace = CSITrace((0.0, args.step_s), (high, low), loop=True)
    save_trace(trace, out / "field_link.csv")
    with topology() as topo:
        serve = ["testbed.serve", "--bind", f"tcp://{topo.edge_addr}:{PORT}"]
        edge = subprocess.Popen(exec_prefix(topo.edge_ns) + py + serve, stdout=subprocess.PIPE, text=True)
        stop = threading.Event()
        try:
            for line in edge.stdout:
                if line.startswith("READY"):
                    break
            shape(topo, trace, 3600.0, stop)
            subprocess.run(exec_prefix(topo.ue_ns) + py + [
                "testbed.ue", "--connect", f"tcp://{topo.edge_addr}:{PORT}", "--prompts", str(args.prompts),
                "--protocol", args.protocol, "--out", str(out / "field"), "--capture", str(out / "field.pcap")],
                check=True)
        finally:
            stop.set()
            edge.terminate()
            edge.wait(timeout=30)
            run_all(clear_cmds(topo.ue_dev, topo.ue_ns) + clear_cmds(topo.edge_dev, topo.edge_ns))
        (out / "topology.json").write_text(json.dumps({"ue": topo.ue_addr, "edge": f"{topo.edge_addr}:{PORT}"}))


def convert_and_replay(out: Path, args: argparse.Namespace) -> pd.DataFrame:
    """Steps 3-5."""
    topo = json.loads((out / "topology.json").read_text())
    py = [sys.executable, "-m"]
    subprocess.run(py + ["channel.trace", "from-pcap", str(out / "field.pcap"), "--ue", topo["ue"], "--edge",
                         topo["edge"], "--window-s", "1", "--out", str(out / "from_pcap.csv"), "--windows-out",
                         str(out / "from_pcap_windows.csv")], check=True)
    subprocess.run(py + ["channel.trace", "from-run", str(out / "field"), "--source", "estimate", "--out",
                         str(out / "from_run.csv")], check=True)
    rows = {"field (captured run)": json.loads((out / "field" / "summary.json").read_text())}
    for name in ("from_pcap", "from_run"):
        rdir = out / f"replay_{name}"
        subprocess.run(py + ["testbed.run", "--protocol", args.protocol, "--prompts", str(args.prompts),
                             "--csi-trace", str(out / f"{name}.csv"), "--no-reference", "--out", str(rdir),
                             "--overwrite"], check=True, stdout=subprocess.DEVNULL)
        rows[f"replay of {name}.csv"] = json.loads((rdir / args.protocol / "summary.json").read_text())
    table = pd.DataFrame(rows).T[COLUMNS]
    table.to_csv(out / "side_by_side.csv")
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.link.field_to_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/field_to_bench", help="directory for everything")
    ap.add_argument("--prompts", type=int, default=10, help="prompts of the run")
    ap.add_argument("--protocol", default="greedy", help="protocol of the run")
    ap.add_argument("--high-mbps", type=float, default=8.0, help="rate before the step, Mbit/s")
    ap.add_argument("--low-mbps", type=float, default=1.0, help="rate after the step, Mbit/s")
    ap.add_argument("--step-s", type=float, default=4.0, help="each rate lasts this long (the step loops), s")
    ap.add_argument("--replay-only", action="store_true", help="skip steps 1-2 (reuse DIR's capture)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.replay_only:
        field_run(out, args)
    table = convert_and_replay(out, args)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string(float_format=lambda x: f"{x:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
