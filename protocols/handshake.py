"""What OPEN checks before a session starts: that the UE's drafter and the edge's target share one tokenizer.

Each side describes its vocabulary as a ``Vocab`` (size and a hash, ``wisv.models.loader.vocab_facts``); the
wire-protocol version is checked on every message by ``protocols.wire.decode`` and the hidden sizes by
``protocols.edge_side``.  A refusal names both sides' values, so that a mismatched pair fails at connect time instead
of producing garbage.
"""
from __future__ import annotations

from dataclasses import dataclass

REFUSALS = ("bad_version", "vocab_mismatch", "shape_mismatch", "too_large")  # ERROR codes at OPEN that end a UE run


@dataclass(frozen=True)
class Vocab:
    """One side's vocabulary as declared at OPEN."""

    size: int  # tokens in the tokenizer's vocabulary (a model without a tokenizer: its config's vocab_size)
    hash: str | None = None  # sha256 hex of the sorted (token, id) pairs; None: no tokenizer, only sizes compared

    def header(self) -> dict:
        """The header fields that declare it (OPEN, REFERENCE): its size, and its hash where known."""
        return {"vocab_size": self.size} | ({"vocab_hash": self.hash} if self.hash else {})


def vocab_refusal(drafter: Vocab, target: Vocab) -> str | None:
    """Why token ids would not mean the same on both sides (the UE's drafter, the edge's target), or None."""
    if drafter.size != target.size:
        return (f"vocabulary size mismatch: the UE's drafter has {drafter.size} tokens, the edge's target has "
                f"{target.size}; drafter and target must share one tokenizer")
    if drafter.hash is not None and target.hash is not None and drafter.hash != target.hash:
        return (f"tokenizer mismatch: the UE's drafter vocabulary has sha256 {drafter.hash[:16]}..., the edge's "
                f"target {target.hash[:16]}... (both {drafter.size} tokens); drafter and target must share one "
                "tokenizer")
    return None
