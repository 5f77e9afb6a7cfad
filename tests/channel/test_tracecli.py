"""python -m channel.trace: Mahimahi in and out on the command line, the shipped traces, one-line errors."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from channel.csitrace import load_trace
from channel.trace import main
from scripts.link.mahimahi_traces import main as make_traces

SHIPPED = Path(__file__).resolve().parents[2] / "scripts" / "link" / "traces" / "mahimahi"


def test_shipped_traces_are_what_the_script_makes(tmp_path):
    assert make_traces(["--out-dir", str(tmp_path)]) == 0
    for name in ("step.csv", "step.up", "step.down", "walk.csv", "walk.up", "walk.down"):
        assert (tmp_path / name).read_text() == (SHIPPED / name).read_text(), name


def test_to_and_from_mahimahi(tmp_path, capsys):
    assert main(["to-mahimahi", str(SHIPPED / "step.csv"), "--out-dir", str(tmp_path)]) == 0
    assert "rates only" in capsys.readouterr().out
    out = tmp_path / "back.csv"
    assert main(["from-mahimahi", str(tmp_path / "step.up"), str(tmp_path / "step.down"), "--rtt-ms", "40",
                 "--window-s", "1", "--out", str(out)]) == 0
    back, orig = load_trace(out), load_trace(SHIPPED / "step.csv")
    assert len(back) == 20 and all(abs(back.at(t).rate_down_mbps / orig.at(t).rate_down_mbps - 1) < 0.02
                                   for t in range(20))
    walk = tmp_path / "walk.csv"
    assert main(["from-mahimahi", str(SHIPPED / "walk.up"), str(SHIPPED / "walk.down"), "--out", str(walk)]) == 0
    assert load_trace(walk).outage_spans == ((20.0, 21.0),) and pd.read_csv(walk)["rtt_ms"].eq(0).all()


def test_bad_mahimahi_is_one_line(tmp_path):
    (tmp_path / "up").write_text("1\n2\n9\n4\n")
    res = subprocess.run([sys.executable, "-m", "channel.trace", "from-mahimahi", str(tmp_path / "up"),
                          str(SHIPPED / "step.down"), "--out", str(tmp_path / "x.csv")], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert f"{tmp_path / 'up'}: line 4: time 4 ms is before the line above it (9 ms)" in res.stderr
