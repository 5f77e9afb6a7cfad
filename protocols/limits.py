"""The bounds decode enforces (``Limits``): a module of its own, so that the checks across a message's fields
(protocols/msgchecks.py) and the schema (protocols/schema.py) both read it without importing each other."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Bounds that decode enforces; size bounds are checked on declared shapes before any buffer is read."""

    vocab_size: int  # token ids must be in [0, vocab_size); also the max width V of DRAFT "probs"
    max_draft_len: int = 64  # max tokens per DRAFT block (K); HIDDEN_REQ positions must be < this
    max_hidden_dim: int = 16384  # max hidden width d of any hidden-state tensor
    max_prompt_len: int = 8192  # max tokens in the OPEN prompt
    max_positions: int = 64  # max positions per HIDDEN_REQ, and max rows (m) per HIDDEN
    max_frame_bytes: int = 64 * 2**20  # max bytes in any one frame (frame 0 or a tensor frame)
    max_header_bytes: int = 64 * 2**10  # max bytes of the msgpack header (frame 0 minus its type byte)
    max_tree_depth: int = 64  # max depth of a DRAFT tree (its size is bounded by max_draft_len)
    max_probe_bytes: int = 2**20  # max PING reply_bytes: a small PING must not buy a large PONG
    draft_features: int = 3  # columns of DRAFT "features": max probability, entropy, top-1 minus top-2 margin
    max_feature_rows: int = 64  # max target-feature rows (positions) a UE may ask for and a VERDICT may carry
