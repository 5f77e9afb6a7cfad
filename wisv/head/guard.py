"""A sure target is never overruled: the guard a judge applies after its score (pure, torch only).

At a greedy mismatch the edge knows how sure the target is of its own token: its top-1 probability and the NLL
margin between its token and the draft token (wisv/head/features.py).  A judge trained on a few kinds of prompts can
still score a changed fact as harmless; the guard turns every mismatch where the target is sure into a rejection,
whatever the judge said.  The KL-judge (arXiv 2601.04766) falls back to strict decoding above a top-1 of 0.9 in the
same way.  The guard may also protect the output's first tokens: an answer-first reply states its answer there, and
a judge cannot tell a changed fact from a synonym from the target's confidence alone (its flip AUC on kinds it never
saw is near 0.5).  A session resumed after an edge restart counts from the resume, so it protects more, never less.
The thresholds are chosen on dev data, never on a test pool.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from wisv.head.features import EdgeFeatures


@dataclass(frozen=True)
class GuardConfig:
    """When the target is sure enough that no judge may overrule it."""

    top1_min: float = 0.9  # reject when the target's top-1 probability is at least this (1.01: never)
    nll_margin_min_nats: float = 4.0  # reject when NLL(draft) - NLL(target) is at least this, nats (inf: never)
    protect_tokens: int = 0  # reject every mismatch among the output's first this many tokens (0: none), tokens


def sure_target(edge: EdgeFeatures, cfg: GuardConfig) -> torch.Tensor:
    """[m] bool: the mismatches no judge may overrule: the target is sure of its own token, or the mismatch falls
    among the output's first ``protect_tokens`` tokens."""
    return (edge.column("top1") >= cfg.top1_min) | (edge.column("nll_margin") >= cfg.nll_margin_min_nats) | \
        (edge.column("out_pos") < cfg.protect_tokens)


def guard(p_reject: torch.Tensor, edge: EdgeFeatures, cfg: GuardConfig | None) -> torch.Tensor:
    """The judge's rejection probabilities [m] with every sure-target mismatch set to 1 (no guard: unchanged)."""
    if cfg is None or len(edge) == 0:
        return p_reject
    return torch.where(sure_target(edge, cfg), torch.ones_like(p_reject), p_reject)
