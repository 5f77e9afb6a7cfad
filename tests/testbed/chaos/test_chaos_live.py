"""A short seeded chaos run (about 60-90 s of faults on the tiny pair): every fault kind against a live batching edge
and four UEs, and no invariant violated (testbed/chaos; the long run is scripts/bench/chaos.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.chaos.schedule import Draw, draw_schedule

SEED = 11  # its schedule holds all 8 kinds within 60 s


@pytest.mark.slow
def test_a_short_seeded_chaos_run_violates_no_invariant(tmp_path: Path) -> None:
    """The built-in toy pair (its tokenizer gives the test split's prompts)."""
    out = tmp_path / "chaos"
    cmd = [sys.executable, "-m", "testbed.chaos", "--seed", str(SEED), "--duration-s", "60", "--warmup-s", "8",
           "--mean-gap-s", "3", "--max-outage-s", "6", "--ues", "5", "--prompts-per-wave", "2",
           "--max-new-tokens", "24", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert (out / "chaos.json").exists(), done.stderr[-3000:]
    doc = json.loads((out / "chaos.json").read_text())
    assert done.returncode == 0 and doc["violations"] == [], done.stdout[-3000:] + done.stderr[-3000:]
    assert doc["fault_kinds"] == 8 and doc["faults_injected"] >= 12
    assert doc["prompts_finished"] >= 8 and "invariant violations: 0" in done.stdout
    assert doc["schedule"] == [f.to_dict() for f in draw_schedule(SEED, Draw(60.0, 8.0, 3.0, 5, 6.0))]  # replayed
    assert sorted(f["kind"] for f in doc["faults"]) == sorted(f["kind"] for f in doc["schedule"])  # all injected
