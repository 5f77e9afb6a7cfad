"""What the edge knows at a greedy mismatch for free: features of the verification pass it already ran (pure).

One target pass over ``[seq[-1]] + draft`` gives logits and hidden states at K + 1 rows; row ``i`` predicts draft
position ``i``.  At a mismatch ``j`` (draft[j] != argmax[j]) the edge reads, with no upload:

- ``nll_draft``, ``nll_target``: the target's NLL (nats) of the draft token and of its own token at ``j``;
- ``nll_margin``: their difference (>= 0, the draft is never more likely than the argmax);
- ``entropy`` (nats) and ``top1`` (probability) of the target's distribution at ``j``;
- ``log_rank``: log(1 + rank of the draft token), rank 1 being the runner-up;
- ``lookahead``: how many draft tokens after ``j`` the target would also have chosen, in a row (the target reads
  the draft token at ``j`` there: a word fragment breaks this agreement, a synonym usually does not);
- ``remaining``: draft tokens after ``j`` (the most ``lookahead`` can be), and ``lookahead_frac``, their ratio;
- ``h_after`` [d_t]: the target's hidden state after reading the draft token (row ``j + 1``);
- with the sibling branch (opt-in: the target's own token t* verified beside the draft token,
  wisv/decoding/siblings.py), where the two branches lead: ``sib_agree`` (1 if the target's argmax after d_j
  equals its argmax after t*), ``sib_js`` (nats, the Jensen-Shannon divergence of its next-token distributions after
  each, <= ln 2) and ``sib_cos`` (the cosine of its hidden states after each).  A synonym leads to the same
  continuation, a changed fact to another.  Without the sibling pass these columns are NaN;
- ``out_pos``: where the mismatch falls in the output (tokens generated before it).  An answer-first reply states
  its answer in its first tokens, so a mismatch there can change the answer; later ones mostly change wording.

Judge Decoding (arXiv 2501.19309) reads ``h_after``; FLy (arXiv 2511.22972) the entropy and the lookahead;
AutoJudge (arXiv 2504.20039) the drafter's and target's hidden states.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

BASE_SCALARS = ("nll_draft", "nll_target", "nll_margin", "entropy", "top1", "log_rank", "lookahead", "remaining",
                "lookahead_frac")  # the one-pass columns (judges shipped before the sibling columns read these)
SIBLING_SCALARS = ("sib_agree", "sib_js", "sib_cos")  # the sibling branch's columns (NaN without its pass)
OUTPUT_SCALARS = ("out_pos",)  # where in the output the mismatch falls (tokens generated before it)
SCALARS = BASE_SCALARS + SIBLING_SCALARS + OUTPUT_SCALARS  # EdgeFeatures.scalars' columns, in order: new ones last


@dataclass(frozen=True)
class SiblingRows:
    """The target's rows after the sibling branch: its own token t* at each mismatch, beside the draft token."""

    logits: torch.Tensor  # [m, V] float32: the target's prediction after t*
    hidden: torch.Tensor  # [m, d_t] float32: its hidden state after t*


@dataclass(frozen=True)
class EdgeFeatures:
    """The edge's free features at m mismatch positions."""

    scalars: torch.Tensor  # [m, len(SCALARS)] float32
    h_after: torch.Tensor  # [m, d_t] float32: the target's hidden state after reading the draft token

    def column(self, name: str) -> torch.Tensor:
        """One scalar feature at every mismatch: [m]."""
        return self.scalars[:, SCALARS.index(name)]

    def __len__(self) -> int:
        return self.scalars.shape[0]

    @classmethod
    def empty(cls, d_target: int = 0) -> EdgeFeatures:
        """No mismatch."""
        return cls(torch.zeros(0, len(SCALARS)), torch.zeros(0, d_target))


def lookahead_runs(draft: list[int], argmax: list[int], positions: list[int]) -> list[int]:
    """Per position j: the number of draft tokens after j, in a row, equal to the target's argmax there."""
    runs = []
    for j in positions:
        n = 0
        for i in range(j + 1, len(draft)):
            if draft[i] != argmax[i]:
                break
            n += 1
        runs.append(n)
    return runs


def sibling_columns(after_draft: torch.Tensor, h_draft: torch.Tensor, sib: SiblingRows) -> torch.Tensor:
    """Where the two branches lead, per mismatch: [m, 3] (sib_agree, sib_js, sib_cos).  ``after_draft`` [m, V] and
    ``h_draft`` [m, d_t]: the target's logits and hidden states after the draft token (block rows j + 1)."""
    sib_logits, sib_hidden = sib.logits.to(after_draft.device), sib.hidden.to(h_draft.device)
    agree = (after_draft.argmax(-1) == sib_logits.argmax(-1)).double()  # [m]
    logp, logq = after_draft.double().log_softmax(-1), sib_logits.double().log_softmax(-1)  # [m, V]
    logm = torch.logaddexp(logp, logq) - math.log(2.0)  # [m, V] the mixture's log-probabilities
    js = 0.5 * ((logp.exp() * (logp - logm)).sum(-1) + (logq.exp() * (logq - logm)).sum(-1))  # [m]
    cos = torch.nn.functional.cosine_similarity(h_draft.double(), sib_hidden.double(), dim=-1)  # [m]
    return torch.stack([agree, js.clamp_min(0.0), cos], dim=1).float()


def edge_features(logits: torch.Tensor, hidden: torch.Tensor, draft: list[int] | torch.Tensor,
                  positions: list[int], siblings: SiblingRows | None = None, out_offset: int = 0) -> EdgeFeatures:
    """Edge features at ``positions`` from one block.  logits [K+1, V], hidden [K+1, d_t], draft [K]; ``siblings``:
    the sibling pass's rows at the same positions (None: the sibling columns are NaN); ``out_offset``: tokens of
    the output generated before the block (out_pos = out_offset + position)."""
    draft = [int(t) for t in (draft.tolist() if torch.is_tensor(draft) else draft)]
    if not positions:
        return EdgeFeatures.empty(hidden.shape[-1])
    k = len(draft)
    pos = torch.tensor(positions, dtype=torch.long)
    logp = logits[pos].float().log_softmax(-1)  # [m, V]
    d_ids = torch.tensor([draft[j] for j in positions], dtype=torch.long)  # [m]
    nll_draft = -logp.gather(1, d_ids[:, None]).squeeze(1)  # [m]
    top_logp, _ = logp.max(-1)  # [m]
    nll_target = -top_logp
    entropy = -(logp.exp() * logp).sum(-1)  # [m]
    rank = (logp > -nll_draft[:, None]).sum(-1).float()  # [m] tokens strictly more likely than the draft
    argmax = logits.argmax(-1).tolist()
    look = torch.tensor(lookahead_runs(draft, argmax, positions), dtype=torch.float32)  # [m]
    remaining = torch.tensor([k - 1 - j for j in positions], dtype=torch.float32)  # [m]
    frac = torch.where(remaining > 0, look / remaining.clamp_min(1), torch.zeros_like(look))
    cols = [nll_draft, nll_target, nll_draft - nll_target, entropy, top_logp.exp(), torch.log1p(rank), look,
            remaining, frac]
    h_after = hidden[pos + 1].float()  # [m, d_t]; row j + 1 read the draft token at j
    base = torch.stack([c.float() for c in cols], dim=1)  # [m, len(BASE_SCALARS)]
    sib = torch.full((len(positions), len(SIBLING_SCALARS)), float("nan")) if siblings is None else \
        sibling_columns(logits[pos + 1], h_after, siblings)
    out_pos = torch.tensor([[out_offset + j] for j in positions], dtype=torch.float32)  # [m, 1]
    return EdgeFeatures(torch.cat([base, sib, out_pos], dim=1), h_after)


def with_out_pos(edge: np.ndarray, out_pos: np.ndarray) -> np.ndarray:
    """Scalar rows recorded before the out_pos column [n, <= len(SCALARS)] widened to every column: the sibling
    columns NaN where missing, out_pos from the record's own position [n] (a recorded row keeps its own)."""
    if edge.shape[1] >= len(SCALARS):
        return edge
    pad = np.full((len(edge), len(SCALARS) - 1 - edge.shape[1]), np.nan, edge.dtype)
    return np.concatenate([edge, pad, np.asarray(out_pos, edge.dtype)[:, None]], axis=1)
