"""The one summary of round records: AAL, rounds per prompt, latency, throughput and WDT by hand."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from wisv.records.rows import RoundRow, to_frame
from wisv.records.summary import summarize_rounds


def _rounds() -> pd.DataFrame:
    # prompt a: 3 rounds accepting 4, 2, 0 of 4; prompt b: 1 round accepting 3 of 3
    spec = [("a", 0, 4, 4), ("a", 1, 4, 2), ("a", 2, 4, 0), ("b", 0, 3, 3)]
    return to_frame(RoundRow(prompt_id=p, round=i, drafted=k, accepted=acc, wdt_tokens=k - acc)
                    for p, i, k, acc in spec)


def test_summary_by_hand():
    prompts = pd.DataFrame({"latency_s": [0.6, 0.2], "n_tokens": [9, 4]})
    s = summarize_rounds(_rounds(), prompts)
    assert s["aal"] == pytest.approx((4 + 2 + 0 + 3) / 4)  # accepted draft tokens per round
    assert s["rounds_per_prompt"] == 2.0  # 4 rounds over 2 prompts
    assert s["latency_s"] == pytest.approx(0.4)  # mean per prompt
    assert s["throughput_tok_s"] == pytest.approx(13 / 0.8)  # generated tokens over the prompts' total time
    assert s["wdt_tokens_per_round"] == pytest.approx((0 + 2 + 4 + 0) / 4)


def test_what_is_not_known_is_nan():
    s = summarize_rounds(_rounds().drop(columns="wdt_tokens"))  # no per-prompt data
    assert s["aal"] == pytest.approx(9 / 4)
    assert all(math.isnan(s[k]) for k in ("rounds_per_prompt", "latency_s", "throughput_tok_s", "wdt_tokens_per_round"))
    empty = summarize_rounds(pd.DataFrame(), pd.DataFrame(columns=["latency_s", "n_tokens"]))
    assert math.isnan(empty["aal"]) and empty["rounds_per_prompt"] == 0.0 and math.isnan(empty["throughput_tok_s"])
    tokens_only = summarize_rounds(_rounds(), pd.DataFrame({"n_tokens": [9, 4]}))
    assert tokens_only["rounds_per_prompt"] == 2.0 and math.isnan(tokens_only["latency_s"])
