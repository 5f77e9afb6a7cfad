"""A trace as a schedule of tc changes: one step per row (loops repeated), netem and tbf forms, and the dry run."""
from __future__ import annotations

import subprocess
import sys

from channel.csi import CSI
from channel.csitrace import CSITrace
from channel.tcschedule import Side, play, row_times, schedule

TRACE = CSITrace((0.0, 10.0), (CSI(200, 100, 5), CSI(3, 2, 60, 0.01, 0.02)))
SIDES = [Side("u0", "ue", "up"), Side("e0", "edge", "down")]


def test_row_times_loop():
    assert row_times(TRACE, 25.0) == [(0.0, 0), (10.0, 1)]
    looped = CSITrace(TRACE.t_s, TRACE.csis, loop=True)
    assert row_times(looped, 45.0) == [(0.0, 0), (10.0, 1), (20.0, 0), (30.0, 1), (40.0, 0)]


def test_netem_steps():
    steps = schedule(TRACE, SIDES, 20.0, have_netem=True)
    assert [s.t_s for s in steps] == [0.0, 10.0]
    up, down = steps[1].cmds
    assert up == ("ip", "netns", "exec", "ue", "tc", "qdisc", "replace", "dev", "u0", "root", "netem", "delay", "30ms",
                  "loss", "1%", "rate", "3mbit", "limit", "1000")
    assert "2%" in down and "2mbit" in down


def test_tbf_steps_and_outage():
    tr = CSITrace((0.0, 1.0, 2.0), (CSI(5, 5, 10),) * 3, outage_spans=((1.0, 2.0),))
    tbf = schedule(tr, SIDES[:1], 3.0, have_netem=False)
    assert tbf[0].cmds[0][5:10] == ("qdisc", "replace", "dev", "u0", "root") and "tbf" in tbf[0].cmds[0]
    assert [s.outage for s in tbf] == [False, True, False]
    netem = schedule(tr, SIDES[:1], 3.0, have_netem=True)
    assert "100%" in netem[1].cmds[0] and "100%" not in netem[2].cmds[0]
    free = schedule(CSITrace.constant(CSI.ideal()), SIDES[:1], 1.0, have_netem=False)
    assert "pfifo" in free[0].cmds[0]


def test_play_waits_for_each_step():
    now, slept, lines = [0.0], [], []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    play(schedule(TRACE, [], 20.0, True), True, echo=lines.append, clock=lambda: now[0], sleep=sleep)  # no commands
    assert slept == [0.0, 10.0] and len(lines) == 2
    lines.clear()
    play(schedule(TRACE, SIDES, 20.0, True), True, dry_run=True, echo=lines.append)
    assert lines[0].startswith("t=0.000 s: up 200 / down 100 Mbit/s") and sum("(dry run)" in ln for ln in lines) == 4


def test_netem_link_dry_run_schedule():
    res = subprocess.run([sys.executable, "scripts/link/netem.py", "--csi-trace",
                          "scripts/link/traces/alternating_10s.csv",
                          "--dry-run", "--hold-s", "25"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "3 tc changes over 25 s" in res.stdout and "t=10.000 s: up 3 / down 3 Mbit/s, RTT 60 ms" in res.stdout
    assert res.stdout.count("netem delay 30ms rate 3mbit") == 2  # both sides at 10 s
    bad = subprocess.run([sys.executable, "scripts/link/netem.py", "--csi-trace", "nope.csv", "--dry-run"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "nope.csv" in bad.stderr
