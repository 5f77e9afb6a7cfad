"""Bytes per round against the latency model's payload formulas with this wire format's packing (pure), for every
protocol the testbed runs end to end: ``auto`` rounds by the protocol each one used, ``tree`` by s_tree/s_tree_fb."""
from __future__ import annotations

import math

import pandas as pd

from protocols.accounting import wire_payload_bits
from scripts.scale_shapes import model_round_bits
from wisv.timing.latency import PayloadBits, s_tree, s_tree_fb

WITHIN = 0.01  # the goal: measured / model within 1% per direction


def round_bits(protocol: str, k: int, m: int, pb: PayloadBits) -> tuple[float, float]:
    """(uplink, downlink) model bits of one round of ``protocol`` (K drafted, m queried)."""
    if protocol == "tree":
        return s_tree(k, pb), s_tree_fb(k, pb)
    return model_round_bits(protocol, k, m, pb)


def bytes_check(protocol: str, rounds: pd.DataFrame, d_d: int, vocab: int) -> dict:
    """Mean measured and model bytes per round, each direction, and their ratio (measured / model)."""
    pb = wire_payload_bits(d_d, vocab)
    per_round = rounds["protocol"].fillna(protocol) if "protocol" in rounds else pd.Series(protocol, rounds.index)
    queried = rounds["queried"].fillna(0).astype(int) if "queried" in rounds else pd.Series(0, rounds.index)
    model = [round_bits(p if protocol == "auto" else protocol, int(k), int(m), pb)
             for p, k, m in zip(per_round, rounds["drafted"], queried)]
    out = {"rounds": len(rounds), "drafted_per_round": float(rounds["drafted"].mean()),
           "protocols_used": per_round.value_counts().to_dict()}
    for i, (side, col) in enumerate((("up", "uplink_bytes"), ("down", "downlink_bytes"))):
        measured, predicted = float(rounds[col].sum()), sum(b[i] for b in model) / 8
        ratio = measured / predicted if predicted else math.nan
        out |= {f"{side}_bytes_per_round": measured / len(rounds), f"{side}_model_bytes_per_round":
                predicted / len(rounds), f"{side}_ratio": ratio, f"{side}_within_1pct": abs(ratio - 1) <= WITHIN}
    return out
