"""scripts/bench/pass_rows.py on the built-in toy pair: a cost per row count for each model, and a plan that pads only
to larger, cheaper counts."""
from __future__ import annotations

import json

from scripts.bench import pass_rows as bench_pass_rows
from wisv.decoding.passrows import load_plan


def test_the_bench_times_every_count_and_writes_a_plan_a_run_can_read(tmp_path):
    out = tmp_path / "rows.json"
    doc = bench_pass_rows.main(["--pair", "toy", "--max-rows", "4", "--repeats", "2", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert set(saved["target_ms_by_rows"]) == set(saved["drafter_ms_by_rows"]) == {"1", "2", "3", "4"}
    assert all(v > 0 for v in doc["target_ms_by_rows"].values())
    ms = doc["target_ms_by_rows"]
    assert all(n < m and ms[m] < 0.95 * ms[n] for n, m in doc["target_pad_plan"].items())
    assert saved["config"]["max_rows"] == 4 and saved["drafter_dtype"] == "float32"
    assert load_plan(str(out)) == doc["target_pad_plan"]
