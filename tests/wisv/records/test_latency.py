"""What a user sees of the rounds, in vLLM's benchmark names (TTFT, TPOT, ITL, E2EL, output throughput), by hand on
hand-built records; and a method's speed-up over server-only, paired per prompt."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from testbed.common.compare import speedups
from testbed.common.summary import LATENCY_COLUMNS, latency_table, summarize
from wisv.records.paired import SPEEDUP_COLUMNS, paired_speedup
from wisv.records.rows import RoundRow, to_frame
from wisv.records.summary import LATENCY_NAMES, latency_metrics, summarize_rounds

# (prompt, round, committed, arrival s): a speculative prompt committing 3, 2, 4 tokens a round, and a stream of one
# token per chunk; listed out of order, with a round that committed nothing and one that has no arrival time
ROWS = [("a", 1, 2, 0.140), ("a", 0, 3, 0.100), ("a", 2, 4, 0.180), ("b", 0, 1, 0.050), ("b", 1, 1, 0.060),
        ("b", 2, 1, 0.080), ("b", 3, 0, 0.500), ("c", 0, 2, None)]


def _rounds() -> pd.DataFrame:
    return to_frame(RoundRow(prompt_id=p, round=r, drafted=0, accepted=0, committed=c, t_arrival_s=t)
                    for p, r, c, t in ROWS)


def test_the_latencies_by_hand() -> None:
    m = latency_metrics(_rounds())
    assert list(m) == list(LATENCY_NAMES)
    # TTFT: a 100 ms, b 50 ms; E2EL: a 180 ms, b 80 ms
    assert (m["mean_ttft_ms"], m["median_ttft_ms"], m["mean_e2el_ms"]) == pytest.approx((75, 75, 130))
    assert m["p99_e2el_ms"] == pytest.approx(np.percentile([180, 80], 99))
    # TPOT: a (180 - 100) / (9 - 1) = 10 ms, b (80 - 50) / (3 - 1) = 15 ms
    assert (m["mean_tpot_ms"], m["p99_tpot_ms"]) == pytest.approx((12.5, np.percentile([10, 15], 99)))
    # ITL per token: a's round 1 brings 2 tokens 40 ms after round 0 (20, 20), round 2 brings 4 40 ms later (10 x 4);
    # b's chunks come 10 and 20 ms apart; the first round's tokens are in TTFT, not here
    itl = [20, 20, 10, 10, 10, 10, 10, 20]
    assert (m["mean_itl_ms"], m["median_itl_ms"], m["p99_itl_ms"]) == pytest.approx(
        (np.mean(itl), np.median(itl), np.percentile(itl, 99)))
    assert m["output_throughput"] == pytest.approx(12 / 0.26)  # tokens over the sum of the E2ELs


def test_without_arrival_times_every_latency_is_nan() -> None:
    old = _rounds().drop(columns=["t_arrival_s"])
    assert all(math.isnan(v) for v in latency_metrics(old).values())
    assert all(math.isnan(v) for v in latency_metrics(to_frame([])).values())
    assert set(LATENCY_NAMES) <= set(summarize_rounds(_rounds(), None))


def test_every_protocols_summary_carries_the_names() -> None:
    outputs = pd.DataFrame({"prompt_id": ["a", "b"], "tokens": [[1] * 9, [2] * 3], "t_e2e_s": [0.2, 0.1]})
    for proto in ("greedy", "server", "device"):
        s = summarize(proto, _rounds(), outputs, pd.DataFrame({"prompt_id": ["a", "b"]}), None, None)
        assert s["mean_ttft_ms"] == pytest.approx(75) and set(LATENCY_NAMES) <= set(s)


def _times(*t_e2e_s: float, error: int | None = None) -> pd.DataFrame:
    ids = [f"p{i}" for i in range(len(t_e2e_s))]
    errors = [("failed" if i == error else None) for i in range(len(ids))]
    return pd.DataFrame({"prompt_id": ids, "t_e2e_s": t_e2e_s, "error": errors})


def test_the_speedup_over_server_only_is_paired_per_prompt() -> None:
    twice = paired_speedup(_times(1.0, 2.0, 3.0), _times(0.5, 1.0, 1.5))
    assert [twice[k] for k in SPEEDUP_COLUMNS] == pytest.approx([2.0, 2.0, 2.0])  # every pair: the same ratio
    mixed = paired_speedup(_times(1.0, 2.0, 3.0, 4.0), _times(0.5, 2.5, 1.0, 4.0))
    assert mixed["speedup_vs_server"] == pytest.approx(10 / 8)
    assert mixed["speedup_ci_low"] < mixed["speedup_vs_server"] < mixed["speedup_ci_high"]
    assert all(math.isnan(v) for v in paired_speedup(_times(1.0), _times()).values())  # no shared prompt


def test_speedups_need_the_baseline_and_skip_failed_prompts() -> None:
    outs = {"server": _times(1.0, 2.0, 8.0), "greedy": _times(0.5, 1.0, 1.0, error=2)}
    got = speedups(outs, "server")
    assert got["server"]["speedup_vs_server"] == pytest.approx(1.0)
    assert got["greedy"]["speedup_vs_server"] == pytest.approx(2.0)  # prompt p2 failed: left out of both totals
    assert speedups(outs, None) == {} and speedups({"greedy": outs["greedy"]}, "server") == {}


def test_the_latency_table_shows_the_speedup_only_where_server_only_ran() -> None:
    base = {c: 1.5 for c in LATENCY_COLUMNS} | {"protocol": "greedy", "mean_ttft_ms": math.nan}
    plain = latency_table([base])
    assert "mean_itl_ms" in plain and "speedup" not in plain and " -" in plain
    shown = latency_table([base | {"speedup_vs_server": 1.234, "speedup_ci_low": 1.1, "speedup_ci_high": 1.3}])
    assert "1.23x [1.10, 1.30]" in shown
