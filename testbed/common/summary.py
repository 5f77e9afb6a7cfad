"""Summaries derived from per-round records and per-prompt outputs (pandas), and the printed comparison table."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from wisv.toydata import is_correct


def read_csv_or_empty(path: Path, **kwargs) -> pd.DataFrame:
    """A per-round/per-request CSV; empty when nothing was recorded (the file is missing or holds no row)."""
    try:
        return pd.read_csv(path, **kwargs)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


SUMMARY_COLUMNS = ["protocol", "prompts", "accuracy", "aal", "rounds_per_prompt", "latency_s", "throughput_tok_s",
                   "uplink_bytes", "downlink_bytes", "matches_target"]


def summarize(protocol: str, rounds: pd.DataFrame, outputs: pd.DataFrame, prompts: pd.DataFrame,
              decode, references: dict[str, list[int]] | None) -> dict:
    """One protocol's summary: accuracy, AAL, rounds, latency, throughput, bytes, losslessness."""
    ok = outputs[outputs["error"].isna()] if "error" in outputs else outputs
    merged = ok.merge(prompts[["prompt_id"] + (["answer"] if "answer" in prompts else [])], on="prompt_id")
    acc = None
    if "answer" in merged and merged["answer"].notna().all() and len(merged):
        acc = float(sum(is_correct(decode(t), int(a)) for t, a in zip(merged["tokens"], merged["answer"])) / len(merged))
    n_tok = int(ok["tokens"].map(len).sum())
    t_total = float(ok["t_e2e_s"].sum()) if len(ok) else math.nan
    match = None
    if references is not None and len(ok):
        match = float(sum(references.get(p) == list(t) for p, t in zip(ok["prompt_id"], ok["tokens"])) / len(ok))
    return {
        "protocol": protocol, "prompts": int(len(ok)), "errors": int(len(outputs) - len(ok)), "accuracy": acc,
        "aal": float(rounds["accepted"].mean()) if len(rounds) else math.nan,
        "rounds_per_prompt": float(len(rounds) / max(1, len(ok))),
        "latency_s": float(ok["t_e2e_s"].mean()) if len(ok) else math.nan,
        "throughput_tok_s": n_tok / t_total if t_total else math.nan,
        "uplink_bytes": int(rounds["uplink_bytes"].sum()) if len(rounds) else 0,
        "downlink_bytes": int(rounds["downlink_bytes"].sum()) if len(rounds) else 0,
        "matches_target": match,
        "t_comm_s_mean": float(rounds["t_comm_s"].mean()) if len(rounds) else math.nan,
        "t_verify_s_mean": float(rounds["t_verify_s"].mean()) if len(rounds) else math.nan,
        "t_draft_s_mean": float(rounds["t_draft_s"].mean()) if len(rounds) else math.nan,
        "generated_tokens": n_tok,
        "wdt_tokens_per_round": float(rounds["wdt_tokens"].mean()) if "wdt_tokens" in rounds else math.nan,
    }


def table(summaries: list[dict]) -> str:
    """Side-by-side text table of protocol summaries."""
    df = pd.DataFrame(summaries)[SUMMARY_COLUMNS].set_index("protocol")
    fmt = {"accuracy": "{:.1%}", "aal": "{:.2f}", "rounds_per_prompt": "{:.1f}", "latency_s": "{:.3f}",
           "throughput_tok_s": "{:.1f}", "matches_target": "{:.2f}"}
    for col, f in fmt.items():
        df[col] = df[col].map(lambda v, f=f: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f.format(v))
    return df.to_string()
