"""Check that a speculative output equals target-only greedy decoding, certifying divergences as near-ties."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

NEAR_TIE_GAP = 1e-4  # largest top-2 logit gap that counts as a floating-point near-tie


@dataclass(frozen=True)
class LosslessReport:
    """Comparison of an output with the target's greedy output."""

    identical: bool
    position: int | None = None  # first divergent new-token index
    gap: float | None = None  # target's top-2 logit gap at that position (full forward on the common prefix)
    reference_token: int | None = None
    got_token: int | None = None

    @property
    def near_tie(self) -> bool:
        """True when the outputs differ only because of a near-tie at the first divergence."""
        return not self.identical and self.gap is not None and self.gap <= NEAR_TIE_GAP

    @property
    def ok(self) -> bool:
        return self.identical or self.near_tie


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token (length differences count), or None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@torch.no_grad()
def top2_gap(target: PreTrainedModel, ids: list[int]) -> float:
    """Top-1 minus top-2 logit of the target's next-token prediction after ``ids``."""
    x = torch.tensor([ids], dtype=torch.long, device=target.device)
    logits = target(input_ids=x).logits[0, -1].float()  # [V]
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


def check_lossless(target: PreTrainedModel, prompt_ids: list[int], reference: list[int],
                   got: list[int]) -> LosslessReport:
    """Compare ``got`` with the target's greedy ``reference`` (both new tokens after ``prompt_ids``)."""
    pos = first_divergence(reference, got)
    if pos is None:
        return LosslessReport(True)
    gap = top2_gap(target, list(prompt_ids) + reference[:pos])
    ref_tok = reference[pos] if pos < len(reference) else None
    got_tok = got[pos] if pos < len(got) else None
    return LosslessReport(False, pos, gap, ref_tok, got_tok)
