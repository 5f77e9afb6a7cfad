"""Bytes on the link: ZMTP framing of our messages, and payload constants of this wire format for the cost model."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

import numpy as np

from protocols.wire import MsgType, encode, make
from wisv.timing.latency import PayloadBits


def zmtp_frame_overhead(nbytes: int) -> int:
    """ZMTP 3 frame header: flags byte plus a 1-byte (<= 255) or 8-byte length."""
    return 2 if nbytes <= 255 else 9


def wire_bytes(frames: Sequence[bytes | memoryview]) -> int:
    """Bytes a DEALER<->ROUTER message occupies on the TCP stream (routing ids are not sent)."""
    return sum(len(f) + zmtp_frame_overhead(len(f)) for f in frames)


def message_bytes(msg) -> int:
    """Wire bytes of a Message."""
    return wire_bytes(encode(msg))


SESSION_TOKEN = "0" * 32  # a live edge's session token (testbed/live/edge/admission.py: 128 bits in hex)


@lru_cache(maxsize=64)
def wire_payload_bits(d_d: int, vocab: int, k: int = 8, features: bool = False, token: bool = False,
                      target_features: int = 0, d_t: int = 0) -> PayloadBits:
    """PayloadBits of this testbed's wire format (int32 ids and positions, fp16 hidden/probs; with ``features``,
    each DRAFT also carries the [K, 3] fp16 draft features; with ``token``, the session token a live edge
    (``testbed.serve``) requires in every uplink message of a session, which in-process sessions do without; with
    ``target_features`` rows of width ``d_t``, each VERDICT carries the target's features, fp16 [rows, d_t]).

    Overheads are measured by encoding representative messages, so the cost model predicts
    the bytes this testbed actually sends.
    """
    csi = {"rate_up_mbps": 1.0, "rate_down_mbps": 1.0, "rtt_ms": 1.0, "per_up": 0.0, "per_down": 0.0}
    tensors = {"tokens": np.zeros(k, np.int32)} | ({"features": np.zeros((k, 3), np.float16)} if features else {})
    draft = make(MsgType.DRAFT, "ue-0000", tensors, round=100, t_draft_s=0.01, csi=csi, protocol="fh",
                 **({"token": SESSION_TOKEN} if token else {}))
    b_feat = 3 * 16 if features else 0
    o_up = message_bytes(draft) * 8 - k * (32 + b_feat)
    verdict = make(MsgType.VERDICT, "ue-0000", None, round=100, n_accepted=3, next_token=300, mismatches=2,
                   queried=2, t_verify_s=0.01, t_head_s=0.001, t_edge_s=0.012, batch=1, done=False)  # as the edge's
    o_dn = message_bytes(verdict) * 8 - (32 + 32)  # s_fb carried as two ints in the header
    tf_bits = 0
    if target_features:  # the features' payload, their descriptor in the header and their frame
        rows = {"features": np.zeros((target_features, d_t), np.float16)}
        tf_bits = (message_bytes(replace(verdict, tensors=rows)) - message_bytes(verdict)) * 8
    return PayloadBits(b_tok=32, b_h=16, b_idx=32, d_d=d_d, vocab=vocab, o_up=o_up, o_dn=o_dn, b_feat=b_feat,
                       tf_bits=tf_bits)
