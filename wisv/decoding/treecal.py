"""Calibrated scores for ranking draft-tree candidates: the drafter's probabilities mapped to the target's measured
acceptance rate per (drafter rank, probability bin), optionally per proposed token, fitted on held-out data.

A candidate's score is the estimated probability that the target's greedy token equals it.  ``fit`` counts, over
teacher-forced positions of target greedy outputs, how often the drafter's rank-r candidate whose probability falls
in bin b is the target's token: ``(hits + alpha * mean_p) / (count + alpha)`` (shrunk towards the drafter's own
probability).  With ``by_token`` a per-(token, rank) rate is shrunk towards that cell value the same way.  Ranks
past the table keep the drafter's probability.  ``Calibration.score`` maps a row of log-probabilities to log-scores
for wisv.decoding.tree.build_tree.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel

from wisv.tasks.evaluate import greedy_reference

EDGES = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999)  # probability bin starts


@dataclass
class Calibration:
    """Acceptance rate of the drafter's candidates by (rank, probability bin), optionally per token."""

    table: list[list[float]]  # [ranks][len(edges)] acceptance rate of a rank-r candidate in bin b
    edges: list[float] = field(default_factory=lambda: list(EDGES))  # bin starts, ascending, the first 0
    alpha: float = 4.0  # shrinkage pseudo-count towards the drafter's probability (or the cell, per token)
    tokens: dict[int, list[list[float]]] = field(default_factory=dict)  # token -> [ranks] [hits, count] (by_token)
    _cells: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, init=False, repr=False, compare=False)
    _dense: torch.Tensor | None = field(default=None, init=False, repr=False, compare=False)  # tokens as a tensor

    @property
    def ranks(self) -> int:
        return len(self.table)

    def score(self, logp: torch.Tensor) -> torch.Tensor:
        """[..., V] drafter log-probabilities -> [..., V] log estimated acceptance probabilities."""
        p = logp.float().exp()
        vals, order = p.topk(min(self.ranks, p.shape[-1]), dim=-1)
        r = torch.arange(vals.shape[-1]).expand_as(vals)
        if self._cells is None:
            self._cells = torch.tensor(self.table), torch.tensor(self.edges)
        table, edges = self._cells
        cal = table[r, torch.bucketize(vals.contiguous(), edges, right=True) - 1]
        if self.tokens:
            hits, count = self._token_counts(order)
            cal = (hits + self.alpha * cal) / (count + self.alpha)
        return p.scatter(-1, order, cal).clamp_min(1e-30).log()

    def _token_counts(self, order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token [hits, count] of each candidate at its rank (zeros for tokens never seen)."""
        if self._dense is None:
            self._dense = torch.zeros(max(self.tokens) + 1, self.ranks, 2)
            for t, rows in self.tokens.items():
                self._dense[t] = torch.tensor(rows)
        seen = order < len(self._dense)
        r = torch.arange(order.shape[-1]).expand_as(order)
        hc = self._dense[order.where(seen, 0), r] * seen[..., None]
        return hc[..., 0], hc[..., 1]

    def to_dict(self) -> dict:
        return {"edges": self.edges, "alpha": self.alpha, "table": self.table,
                "tokens": {str(t): v for t, v in self.tokens.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> Calibration:
        return cls(d["table"], d["edges"], d["alpha"], {int(t): v for t, v in d.get("tokens", {}).items()})


def _bins(p: torch.Tensor, edges: list[float]) -> torch.Tensor:
    return torch.bucketize(p.contiguous(), torch.tensor(edges), right=True) - 1


def fit(top_p: torch.Tensor, top_ids: torch.Tensor, targets: torch.Tensor, ranks: int = 4, alpha: float = 4.0,
        by_token: bool = False, edges: tuple[float, ...] = EDGES) -> Calibration:
    """Fit a Calibration from teacher-forced positions: the drafter's ``top_p``/``top_ids`` [n, >= ranks] (sorted,
    most probable first) and the target's greedy token ``targets`` [n] at each position."""
    p, ids = top_p[:, :ranks].float(), top_ids[:, :ranks]
    hit = (ids == targets[:, None]).float()
    nb = len(edges)
    cell = torch.arange(ranks) * nb + _bins(p, list(edges))
    hits = torch.zeros(ranks * nb).index_add_(0, cell.reshape(-1), hit.reshape(-1))
    count = torch.zeros(ranks * nb).index_add_(0, cell.reshape(-1), torch.ones(cell.numel()))
    psum = torch.zeros(ranks * nb).index_add_(0, cell.reshape(-1), p.reshape(-1))
    mid = torch.tensor([(a + b) / 2 for a, b in zip(edges, list(edges[1:]) + [1.0])]).repeat(ranks)
    prior = torch.where(count > 0, psum / count.clamp_min(1), mid)
    table = ((hits + alpha * prior) / (count + alpha)).view(ranks, nb)
    cal = Calibration([[round(x, 6) for x in row] for row in table.tolist()], list(edges), alpha)
    if by_token:
        cal.tokens = _per_token(ids, hit)
    return cal


def _per_token(ids: torch.Tensor, hit: torch.Tensor) -> dict[int, list[list[float]]]:
    out: dict[int, list[list[float]]] = {}
    for t in ids.unique().tolist():
        at = ids == t
        out[int(t)] = [[float(hit[:, r][at[:, r]].sum()), float(at[:, r].sum())] for r in range(ids.shape[1])]
    return out


@torch.no_grad()
def collect(drafter: PreTrainedModel, target: PreTrainedModel, prompts: list[list[int]], max_new_tokens: int,
            ranks: int = 4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher-forced drafter top-``ranks`` (probabilities, ids) at each position of each prompt's target greedy
    output, and the target's token there: the data ``fit`` takes."""
    ps, ids, ys = [], [], []
    for prompt in prompts:
        ref = greedy_reference(target, prompt, max_new_tokens)
        logits = drafter(torch.tensor([prompt + ref])).logits[0, len(prompt) - 1:-1]
        p, i = torch.softmax(logits.float(), dim=-1).topk(ranks, dim=-1)
        ps.append(p)
        ids.append(i)
        ys.append(torch.tensor(ref))
    return torch.cat(ps), torch.cat(ids), torch.cat(ys)
