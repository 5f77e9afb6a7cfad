"""Bytes per round against the latency model's payload formulas with this wire format's packing (pure), for every
protocol the testbed runs end to end, by its description (wisv.timing.protodesc): a chooser's (``auto``) rounds by the
protocol each one used, a tree's by s_tree/s_tree_fb.

The packing is ``wire_payload_bits`` with the live edge's session token, its uplink overhead ``o_up`` measured per
protocol on that protocol's own DRAFT: an FH, reject or tree DRAFT carries a second tensor (hidden states,
probabilities, parents), whose descriptor and frame a tokens-only DRAFT does not have.  SH's second exchange is
charged with the overheads of its own messages (HIDDEN up, HIDDEN_REQ down), measured the same way, where eqs.
s_sh2 / s_req reuse o_up / o_dn.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from protocols.accounting import SESSION_TOKEN, message_bytes, wire_payload_bits
from protocols.wire import MsgType, make
from scripts.gpucheck.scale_shapes import model_round_bits
from wisv.timing.latency import PayloadBits
from wisv.timing.protodesc import POSITION_BITS, describe

WITHIN = 0.01  # the goal: measured / model within 1% per direction


def protocol_bits(protocol: str, d_d: int, vocab: int, k: int = 8) -> PayloadBits:
    """The wire packing of ``protocol``'s rounds: ``o_up`` = its representative DRAFT's bits less its payload (a
    tokens-only DRAFT: ``wire_payload_bits``'s)."""
    pb = wire_payload_bits(d_d, vocab, k, token=True)
    shapes = {"hidden": ((k, d_d), np.float16), "probs": ((k, vocab), np.float16), "parents": ((k,), np.int32)}
    extra = {f: np.zeros(*shapes[f]) for f in describe(protocol).uplink if f in shapes}  # the DRAFT's own tensors
    if not extra:
        return pb
    csi = {"rate_up_mbps": 1.0, "rate_down_mbps": 1.0, "rtt_ms": 1.0, "per_up": 0.0, "per_down": 0.0}
    draft = make(MsgType.DRAFT, "ue-0000", {"tokens": np.zeros(k, np.int32)} | extra, round=100,
                 t_draft_s=0.01, csi=csi, protocol=protocol, token=SESSION_TOKEN)
    payload = k * sum(POSITION_BITS[f](pb) for f in extra)
    return replace(pb, o_up=message_bytes(draft) * 8 - k * pb.b_tok - payload)


def sh_overheads(d_d: int) -> tuple[float, float]:
    """(HIDDEN, HIDDEN_REQ) overhead bits: each message less its m hidden vectors or m positions (m = 1)."""
    hidden = make(MsgType.HIDDEN, "ue-0000", {"hidden": np.zeros((1, d_d), np.float16)}, round=100,
                  token=SESSION_TOKEN)
    req = make(MsgType.HIDDEN_REQ, "ue-0000", {"positions": np.zeros(1, np.int32)}, round=100)
    return message_bytes(hidden) * 8 - d_d * 16, message_bytes(req) * 8 - 32


def round_bits(protocol: str, k: int, m: int, pb: PayloadBits, sh: tuple[float, float] | None = None
               ) -> tuple[float, float]:
    """(uplink, downlink) model bits of one round of ``protocol`` (K drafted, m queried); ``sh``: the overheads of
    SH's second exchange (None: the latency model's o_up / o_dn)."""
    up, down = model_round_bits(protocol, k, 0 if sh is not None else m, pb)
    if describe(protocol).hidden_query and sh is not None and m:
        up, down = up + m * pb.s_h + sh[0], down + m * pb.b_idx + sh[1]
    return up, down


def bytes_check(protocol: str, rounds: pd.DataFrame, d_d: int, vocab: int) -> dict:
    """Mean measured and model bytes per round, each direction, and their ratio (measured / model), over the
    speculative rounds: a round ``auto`` handed to the edge (``edge_alone``: a GENERATE and a CHUNK, no DRAFT) is
    counted apart (``edge_alone_rounds``), not priced as a DRAFT."""
    handed = rounds["edge_alone"].fillna(False).astype(bool) if "edge_alone" in rounds else pd.Series(False,
                                                                                                         rounds.index)
    rounds = rounds[~handed]
    per_round = rounds["protocol"].fillna(protocol) if "protocol" in rounds else pd.Series(protocol, rounds.index)
    queried = rounds["queried"].fillna(0).astype(int) if "queried" in rounds else pd.Series(0, rounds.index)
    used = per_round if describe(protocol).chooses else pd.Series(protocol, rounds.index)
    pbs = {p: protocol_bits(p, d_d, vocab) for p in dict.fromkeys(used)}
    sh = sh_overheads(d_d)
    model = [round_bits(p, int(k), int(m), pbs[p], sh) for p, k, m in zip(used, rounds["drafted"], queried)]
    out = {"rounds": len(rounds), "edge_alone_rounds": int(handed.sum()), "drafted_per_round": float(rounds[
        "drafted"].mean()),
           "protocols_used": per_round.value_counts().to_dict()}
    for i, (side, col) in enumerate((("up", "uplink_bytes"), ("down", "downlink_bytes"))):
        measured, predicted = float(rounds[col].sum()), sum(b[i] for b in model) / 8
        ratio = measured / predicted if predicted else math.nan
        out |= {f"{side}_bytes_per_round": measured / len(rounds), f"{side}_model_bytes_per_round":
                predicted / len(rounds), f"{side}_ratio": ratio, f"{side}_within_1pct": abs(ratio - 1) <= WITHIN}
    return out
