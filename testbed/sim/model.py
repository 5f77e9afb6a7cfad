"""Apply the round-time model (wisv.timing.roundtime) to acceptance traces: per-prompt latency and Table-I metrics.

Prompts run back to back on one clock, so a time-varying link (a CSI trace) is looked up at each
round's start.  A round that drafted nothing (a 1-token budget left) is charged as K = 1.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from channel.csi import CSI
from channel.outage import Outages
from wisv.records.summary import summarize_rounds
from wisv.timing.alone import alone_s
from wisv.timing.protodesc import ProtocolDesc
from wisv.timing.roundtime import Deployment, rounds_s


def prompt_latencies(trace: pd.DataFrame, protocol: str, csi_at: Callable[[float], CSI], dep: Deployment,
                     t0_s: float = 0.0, outages: Outages | None = None) -> pd.DataFrame:
    """Per prompt: latency_s (eq. 22 over its rounds, paused by the link's outages), n_tokens, correct (AAL and
    rounds come from the trace)."""
    memo: dict[tuple, float] = {}
    t, out = t0_s, []
    for pid, g in trace.groupby("prompt_id", sort=False):
        latency = rounds_s(zip(g["drafted"], g["prefix_len"], g["mismatches"]), protocol, csi_at, dep, t, memo, outages)
        t += latency
        out.append({"prompt_id": pid, "latency_s": latency, "n_tokens": int(g["n_tokens"].iloc[0]),
                    "correct": bool(g["correct"].iloc[0])})
    return pd.DataFrame(out)


def alone_latencies(trace: pd.DataFrame, d: ProtocolDesc, csi_at: Callable[[float], CSI], dep: Deployment,
                    t0_s: float = 0.0, outages: Outages | None = None, chunk_tokens: int = 1) -> pd.DataFrame:
    """Per prompt of a protocol generating alone (wisv.timing.alone), streamed in chunks of ``chunk_tokens``: its
    output length from a greedy ``trace`` (the target's; on-device too, the drafter's own being untraced); latency_s
    paused by the outages as one block."""
    t, out = t0_s, []
    for pid, g in trace.groupby("prompt_id", sort=False):
        n = int(g["committed"].sum())
        t_start = t
        prompt_len = int(g["prefix_len"].iloc[0])  # round 0's prefix: the prompt
        latency = alone_s(d, prompt_len, n, lambda s, t0=t_start: csi_at(t0 + s), dep, chunk_tokens)
        t = outages.stretch(t, latency) if outages else t + latency
        out.append({"prompt_id": pid, "latency_s": t - t_start, "n_tokens": int(g["n_tokens"].iloc[0]),
                    "correct": bool(g["correct"].iloc[0]) if d.edge_rounds else math.nan})
    return pd.DataFrame(out)


def summarize(trace: pd.DataFrame, per_prompt: pd.DataFrame) -> dict:
    """Table-I metrics of a trace's rounds and its prompt_latencies: mean latency per prompt, AAL (eq. 20), rounds
    per prompt (eq. 21), throughput (wisv.records.summary), accuracy."""
    m = summarize_rounds(trace, per_prompt)
    return {"prompts": len(per_prompt), "latency_s": m["latency_s"], "aal": m["aal"],
            "rounds_per_prompt": m["rounds_per_prompt"], "throughput_tok_s": m["throughput_tok_s"],
            "accuracy": float(per_prompt["correct"].astype(float).mean()) if len(per_prompt) else math.nan}


def constant(csi: CSI) -> Callable[[float], CSI]:
    """A CSI lookup that ignores time."""
    return lambda _t: csi
