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
- ``h_after`` [d_t]: the target's hidden state after reading the draft token (row ``j + 1``).

Judge Decoding (arXiv 2501.19309) reads ``h_after``; FLy (arXiv 2511.22972) the entropy and the lookahead;
AutoJudge (arXiv 2504.20039) the drafter's and target's hidden states.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

SCALARS = ("nll_draft", "nll_target", "nll_margin", "entropy", "top1", "log_rank", "lookahead", "remaining",
           "lookahead_frac")  # the columns of EdgeFeatures.scalars, in order


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


def edge_features(logits: torch.Tensor, hidden: torch.Tensor, draft: list[int] | torch.Tensor,
                  positions: list[int]) -> EdgeFeatures:
    """Edge features at ``positions`` from one block.  logits [K+1, V], hidden [K+1, d_t], draft [K]."""
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
    return EdgeFeatures(torch.stack([c.float() for c in cols], dim=1), h_after)
