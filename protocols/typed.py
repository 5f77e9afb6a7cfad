"""The decoded messages a caller reads as typed fields, not dict keys: ``Verdict``, ``OpenOk`` and ``Chunk`` (built
after protocols/wire.py's decode checked the message against protocols/schema.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A decoded VERDICT as typed fields (``Verdict.of(msg.header, msg.tensors)`` after decode validated it)."""

    round: int  # the round it answers
    n_accepted: int  # draft tokens accepted (tree: nodes on the accepted path)
    next_token: int  # the target's token after them (correction or bonus)
    mismatches: int  # draft tokens that differ from the target's argmax
    queried: int  # mismatches whose hidden states the edge asked for (sh)
    t_verify_s: float  # the target's verification, s
    t_head_s: float  # the decision head, s
    t_edge_s: float  # all edge handling this round, decode to reply, s (absent on the wire: t_verify_s + t_head_s)
    done: bool  # the session ended (budget or EOS)
    batch: int = 1  # requests verified in the same target pass
    stop_depth: int | None = None  # the edge's suggested K for the next block (None: none)
    path: tuple[int, ...] = ()  # tree: the accepted path's node indices, root first
    features: np.ndarray | None = None  # [n, d_t] fp16 target features at the last n committed positions (if granted)
    edge_drafted: int | None = None  # tokens the edge drafted itself after the draft (--edge-draft; None: none)
    edge_tokens: tuple[int, ...] = ()  # of them, those committed after the wholly accepted draft, before next_token

    @classmethod
    def of(cls, header: dict[str, Any], tensors: dict[str, np.ndarray] | None = None) -> Verdict:
        h = header
        return cls(round=h["round"], n_accepted=h["n_accepted"], next_token=h["next_token"],
                   mismatches=h["mismatches"], queried=h["queried"], t_verify_s=h["t_verify_s"],
                   t_head_s=h["t_head_s"], t_edge_s=h.get("t_edge_s", h["t_verify_s"] + h["t_head_s"]),
                   done=h["done"], batch=h.get("batch", 1), stop_depth=h.get("stop_depth"),
                   path=tuple(int(i) for i in (tensors or {}).get("path", ())),
                   features=(tensors or {}).get("features"), edge_drafted=h.get("edge_drafted"),
                   edge_tokens=tuple(int(t) for t in (tensors or {}).get("edge_tokens", ())))


@dataclass(frozen=True, kw_only=True)
class OpenOk:
    """A decoded OPEN_OK as typed fields (``OpenOk.of(msg.header)`` after decode validated it)."""

    target_hidden: int  # the target's hidden size
    vocab_size: int  # the target's vocabulary size, tokens
    hidden_layer: int = -1  # the target layer the edge's decision head reads
    vocab_hash: str | None = None  # sha256 of the target tokenizer's (token, id) pairs (None: not sent)
    edge: dict[str, Any] | None = None  # the edge's settings, a run records them (None: not sent)
    token: str | None = None  # the session token the session's later messages carry (None: not sent)
    features: int = 0  # target-feature rows each VERDICT carries (granted only to a UE that asked; 0: none)

    @classmethod
    def of(cls, header: dict[str, Any]) -> OpenOk:
        h = header
        return cls(target_hidden=h["target_hidden"], vocab_size=h["vocab_size"], hidden_layer=h.get("hidden_layer", -1),
                   vocab_hash=h.get("vocab_hash"), edge=h.get("edge"), token=h.get("token"),
                   features=h.get("features", 0))


@dataclass(frozen=True, kw_only=True)
class Chunk:
    """A decoded CHUNK as typed fields (``Chunk.of(msg.header, msg.tensors)`` after decode validated it)."""

    round: int  # the chunk's index in the stream
    tokens: tuple[int, ...]  # its tokens
    t_decode_s: float  # the target's passes that decoded them, s
    t_edge_s: float  # edge time since the previous chunk went out (or GENERATE came in), s
    done: bool  # the stream ended (budget or EOS)
    batch: int = 1  # most sessions decoded in one of those passes
    drafted: int = 0  # tokens the edge drafted for those passes (--edge-draft; 0: none)
    accepted: int = 0  # of them, tokens committed
    stopped: bool = False  # a handed-over run ended here, before its tokens: the UE's prompt lookup agrees again

    @classmethod
    def of(cls, header: dict[str, Any], tensors: dict[str, np.ndarray]) -> Chunk:
        h = header
        return cls(round=h["round"], tokens=tuple(int(t) for t in tensors["tokens"]), t_decode_s=h["t_decode_s"],
                   t_edge_s=h["t_edge_s"], done=h["done"], batch=h.get("batch", 1),
                   drafted=h.get("drafted", 0), accepted=h.get("accepted", 0), stopped=h.get("stopped", False))
