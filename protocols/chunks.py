"""When a chunk of generated tokens goes out: the rule server-only's stream, on-device and auto's handed-over runs
share (protocols/stream.py, protocols/ue_stream.py, protocols/edge_run.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from protocols.wire import Message, MsgType, make


@dataclass(frozen=True)
class ChunkRule:
    """When a chunk of a stream ends: at ``every_tokens`` tokens, or once ``every_ms`` passed since the previous chunk
    (with at least one token), whichever comes first; with neither, every token is a chunk."""

    every_tokens: int | None = None  # a chunk ends at this many tokens (None: no token bound)
    every_ms: float | None = None  # or this long after the previous chunk, ms (None: no time bound)

    def __post_init__(self) -> None:
        if self.every_tokens is not None and self.every_tokens < 1:
            raise ValueError(f"a chunk holds at least 1 token, got every_tokens={self.every_tokens}")
        if self.every_ms is not None and not 0 < self.every_ms < math.inf:
            raise ValueError(f"a chunk period must be finite and > 0 ms, got every_ms={self.every_ms}")

    def header(self) -> dict:
        """GENERATE's fields for this rule (only those given)."""
        given = {"every_tokens": self.every_tokens, "every_ms": self.every_ms}
        return {k: v for k, v in given.items() if v is not None}

    @classmethod
    def of(cls, header: dict) -> ChunkRule:
        return cls(header.get("every_tokens"), header.get("every_ms"))


def chunk_due(rule: ChunkRule, tokens: int, elapsed_s: float) -> bool:
    """Whether a chunk holding ``tokens`` tokens, ``elapsed_s`` after the previous chunk, ends now (pure)."""
    if tokens < 1:
        return False
    if rule.every_tokens is None and rule.every_ms is None:
        return True
    by_count = rule.every_tokens is not None and tokens >= rule.every_tokens
    return by_count or (rule.every_ms is not None and elapsed_s * 1e3 >= rule.every_ms)


def chunk_message(sid: str, tokens: list[int], round_: int, t_decode_s: float, t_edge_s: float, batch: int,
                  done: bool, drafts: tuple[int, int] | None, stopped: bool = False) -> Message:
    """A CHUNK of a stream or of a handed-over run: its tokens, index, timing and, with the edge's drafter,
    ``drafts`` (drafted, accepted) of its passes; ``stopped``: a run ended here, before its tokens (its lookup
    stop)."""
    counts = {} if drafts is None else {"drafted": drafts[0], "accepted": drafts[1]}
    counts |= {"stopped": True} if stopped else {}
    return make(MsgType.CHUNK, sid, {"tokens": np.asarray(tokens, np.int32)}, round=round_, t_decode_s=t_decode_s,
                t_edge_s=t_edge_s, batch=batch, done=done, **counts)
