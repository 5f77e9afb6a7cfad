"""How well `channel.trace from-pcap` reads a link back: capture TCP over a namespace link shaped by a known trace.

``sudo python -m scripts.link.pcap_fidelity`` (root) makes two namespaces joined by a veth, replays the known trace on
it as tc changes (channel/tcschedule.py: tbf rates, plus netem RTT/PER where the kernel has netem), runs alternating
bulk TCP transfers (uplink, then downlink, each ``--burst-s``, twice a second) from the UE namespace, captures them
on the UE's veth (channel/capture.py), converts the capture, and prints the table of windows: measured vs emulated,
and whether each measurable window is within ±10% rate and ±5 ms RTT.  Writes ``--out``/fidelity.json, the capture,
the converted trace and the table.  Without netem the emulated RTT is the veth's own (0 ms added).
"""
from __future__ import annotations

import argparse
import json
import math
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from channel.capture import capturing
from channel.csi import CSI
from channel.csitrace import CSITrace, save_trace
from channel.netns import exec_prefix, topology
from channel.pcap import WindowStats, pcap_windows, stats_to_trace
from channel.tc import clear_cmds, kernel_has_netem, run_all
from channel.tcschedule import Side, play, schedule

PORT = 5601
RATE_TOL, RTT_TOL_MS = 0.10, 5.0
SNDBUF = 16384  # small send buffers: a phase's data drains soon after it ends


def known_trace(rtt_ms: float) -> CSITrace:
    """The emulated link: a rate step at 8 s (8/16 Mbit/s up/down, then 2/4)."""
    return CSITrace((0.0, 8.0), (CSI(8, 16, rtt_ms), CSI(2, 4, rtt_ms)))


def _bulk(sock: socket.socket, seconds: float) -> None:
    """Send for `seconds` as fast as the socket takes it."""
    chunk, end = b"x" * 65536, time.monotonic() + seconds
    sock.settimeout(0.05)
    while time.monotonic() < end:
        try:
            sock.send(chunk)
        except TimeoutError:
            pass


def _drain(sock: socket.socket) -> None:
    while sock.recv(1 << 16):
        pass


def serve(port: int) -> None:
    """Edge side: connection 1 is drained (uplink); on connection 2 each byte b asks for b/100 s of bulk downlink."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen()
    up, _ = srv.accept()
    threading.Thread(target=_drain, args=(up,), daemon=True).start()
    down, _ = srv.accept()
    down.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF)
    while (b := down.recv(1)):
        _bulk(down, b[0] / 100)
        down.settimeout(None)


def client(host: str, port: int, duration_s: float, burst_s: float) -> None:
    """UE side: alternate burst_s of uplink bulk and burst_s of downlink bulk, twice a second."""
    up = socket.create_connection((host, port))
    up.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF)
    down = socket.create_connection((host, port))
    threading.Thread(target=_drain, args=(down,), daemon=True).start()
    print("GO", flush=True)  # connected: the link's clock starts now
    end = time.monotonic() + duration_s
    while time.monotonic() < end:
        cycle = time.monotonic()
        _bulk(up, burst_s)
        down.send(bytes([int(burst_s * 100)]))
        time.sleep(max(0.0, cycle + 0.5 - time.monotonic()))
    up.close()
    down.close()


def compare(stats: list[WindowStats], t_capture0: float, t_link0: float, trace: CSITrace,
            window_s: float) -> list[dict]:
    """One row per window: measured, emulated (at the window's middle on the link's clock), within bounds."""
    rows = []
    for i, s in enumerate(stats):
        mid = t_capture0 + (i + 0.5) * window_s - t_link0
        e = trace.at(mid)
        checks = [_within(s.rate_up_mbps, e.rate_up_mbps, RATE_TOL * e.rate_up_mbps),
                  _within(s.rate_down_mbps, e.rate_down_mbps, RATE_TOL * e.rate_down_mbps),
                  _within(s.rtt_ms, e.rtt_ms, RTT_TOL_MS)]
        measurable = checks[0] is not None or checks[1] is not None
        rows.append({"window": i, "t_link_s": round(mid, 2), "up": s.rate_up_mbps, "emu_up": e.rate_up_mbps,
                     "down": s.rate_down_mbps, "emu_down": e.rate_down_mbps, "rtt_ms": s.rtt_ms, "emu_rtt_ms": e.rtt_ms,
                     "measurable": measurable, "within": measurable and all(c for c in checks if c is not None)})
    return rows


def _within(measured: float, emulated: float, tol: float) -> bool | None:
    """|measured - emulated| <= tol; None when not measured."""
    return None if math.isnan(measured) else abs(measured - emulated) <= tol


def table(rows: list[dict]) -> str:
    f = lambda x: "   -  " if isinstance(x, float) and math.isnan(x) else f"{x:6.2f}"  # noqa: E731
    lines = ["win  t_link_s  up_Mbps (emu)    down_Mbps (emu)  rtt_ms (emu)  measurable within"]
    for r in rows:
        lines.append(f"{r['window']:3d} {r['t_link_s']:8.2f}  {f(r['up'])} ({r['emu_up']:5.1f})  "
                     f"{f(r['down'])} ({r['emu_down']:5.1f})  {f(r['rtt_ms'])} ({r['emu_rtt_ms']:4.1f})  "
                     f"{'yes' if r['measurable'] else 'no':>10} {'yes' if r['within'] else '-':>6}")
    return "\n".join(lines)


def run(out: Path, duration_s: float, window_s: float, burst_s: float) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    py = [sys.executable, "-m", "scripts.link.pcap_fidelity"]
    with topology() as topo:
        have = kernel_has_netem(topo.ue_dev, topo.ue_ns).available
        trace = known_trace(rtt_ms=20.0 if have else 0.0)
        sides = [Side(topo.ue_dev, topo.ue_ns, "up"), Side(topo.edge_dev, topo.edge_ns, "down")]
        steps = schedule(trace, sides, duration_s, have)
        srv = subprocess.Popen(exec_prefix(topo.edge_ns) + py + ["serve", "--port", str(PORT)])
        try:
            with capturing(str(out / "capture.pcap"), topo.ue_dev, topo.ue_ns):
                time.sleep(0.5)
                cli = subprocess.Popen(exec_prefix(topo.ue_ns) + py + [
                    "client", "--host", topo.edge_addr, "--port", str(PORT), "--duration-s", str(duration_s),
                    "--burst-s", str(burst_s)], stdout=subprocess.PIPE, text=True)
                cli.stdout.readline()
                t_link0 = time.time()
                play(steps, have, echo=lambda line: None)
                cli.wait(timeout=duration_s + 30)
        finally:
            srv.kill()
            srv.wait()
            run_all([c for s in sides for c in clear_cmds(s.dev, s.netns)])
    t0, stats = pcap_windows(str(out / "capture.pcap"), topo.ue_addr, f"{topo.edge_addr}:{PORT}", window_s)
    save_trace(stats_to_trace(stats, window_s), out / "trace.csv")
    rows = compare(stats, t0, t_link0, trace, window_s)
    n_meas = sum(r["measurable"] for r in rows)
    result = {"netem": have, "windows": len(rows), "measurable": n_meas, "within": sum(r["within"] for r in rows),
              "share_within": sum(r["within"] for r in rows) / max(n_meas, 1),
              "share_measurable": n_meas / max(len(rows), 1), "rows": rows}
    result["goal_met"] = result["share_within"] >= 0.9 and result["share_measurable"] >= 0.5
    (out / "fidelity.json").write_text(json.dumps(result, indent=1))
    (out / "table.txt").write_text(table(rows) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.link.pcap_fidelity", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd")
    s = sub.add_parser("serve", help="(inside the edge namespace)")
    s.add_argument("--port", type=int, default=PORT)
    c = sub.add_parser("client", help="(inside the UE namespace)")
    c.add_argument("--host", required=True)
    c.add_argument("--port", type=int, default=PORT)
    c.add_argument("--duration-s", type=float, default=16.0)
    c.add_argument("--burst-s", type=float, default=0.2)
    ap.add_argument("--out", default="runs/pcap_fidelity",
                    help="directory for the results (the committed ones: results/pcap_fidelity)")
    ap.add_argument("--duration-s", type=float, default=16.0, help="length of the run, s (the step is at 8 s)")
    ap.add_argument("--window-s", type=float, default=1.0, help="window of the converted trace, s")
    ap.add_argument("--burst-s", type=float, default=0.2, help="each bulk phase, s (one up and one down per 0.5 s)")
    args = ap.parse_args(argv)
    if args.cmd == "serve":
        serve(args.port)
    elif args.cmd == "client":
        client(args.host, args.port, args.duration_s, args.burst_s)
    else:
        r = run(Path(args.out), args.duration_s, args.window_s, args.burst_s)
        print(table(r["rows"]))
        print(f"measurable windows {r['measurable']}/{r['windows']}; within ±10% rate and ±5 ms RTT: {r['within']}/"
              f"{r['measurable']} ({r['share_within']:.0%}); netem: {r['netem']}; goal met: {r['goal_met']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
