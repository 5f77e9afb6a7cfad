"""The one summary of per-round records: AAL, rounds per prompt, latency, throughput and WDT (pandas, no torch)."""
from __future__ import annotations

import math

import pandas as pd


def summarize_rounds(rounds: pd.DataFrame, prompts: pd.DataFrame | None = None) -> dict[str, float]:
    """AAL (eq. 20), rounds per prompt (eq. 21), generated tokens per prompt and rounds per 100 generated tokens (a
    gain from shorter outputs is drift, not speed), mean latency per prompt, throughput and WDT per round.

    ``rounds``: per-round records (wisv.records.rows; ``accepted``, and ``wdt_tokens`` where measured).
    ``prompts``: one row per finished prompt, with ``latency_s`` (its end-to-end time, s) and ``n_tokens`` (tokens
    it generated) where known; None when the caller has no per-prompt data.  Undefined values are NaN, except
    rounds per prompt with no finished prompt: the rounds over 1 (0.0 when none was recorded), as testbed.run wrote."""
    n = len(prompts) if prompts is not None else 0
    latency = prompts["latency_s"] if prompts is not None and "latency_s" in prompts else pd.Series(dtype=float)
    total_s = float(latency.sum()) if len(latency) else math.nan
    tokens = int(prompts["n_tokens"].sum()) if prompts is not None and "n_tokens" in prompts else 0
    return {
        "aal": float(rounds["accepted"].mean()) if len(rounds) and "accepted" in rounds else math.nan,
        "rounds_per_prompt": float(len(rounds) / max(1, n)) if prompts is not None else math.nan,
        "tokens_per_prompt": tokens / n if n and "n_tokens" in prompts else math.nan,
        "rounds_per_100_tokens": 100 * len(rounds) / tokens if tokens else math.nan,
        "latency_s": float(latency.mean()) if len(latency) else math.nan,
        "throughput_tok_s": tokens / total_s if total_s > 0 else math.nan,
        "wdt_tokens_per_round": float(rounds["wdt_tokens"].mean()) if "wdt_tokens" in rounds else math.nan,
    }
