"""Pure acceptance rules for one verification block: greedy, speculative sampling and WISV semantic acceptance.

Terms (as in Leviathan et al. 2023 and vLLM's rejection sampler):
- *accepted* tokens are the leading draft tokens that are committed unchanged;
- the *recovered* (correction) token replaces the first rejected draft token;
- the *bonus* token is appended when every draft token is accepted; it comes from the
  target's prediction after the last draft position.
Every rule returns a ``Verdict``: commit ``draft[:n_accepted] + [next_token]``.

Shapes: ``K`` draft tokens, target rows ``K + 1`` (row ``i`` predicts the token after draft
position ``i - 1``; row ``K`` gives the bonus), vocabulary ``V``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Verdict:
    """Outcome of verifying one draft block."""

    n_accepted: int  # draft tokens committed as drafted
    next_token: int  # recovered token at n_accepted, or the bonus token if n_accepted == K
    mismatches: tuple[int, ...] = field(default=())  # positions where draft != target argmax
    rejected_at: int | None = None  # first rejected position, None when all K accepted

    @property
    def is_bonus(self) -> bool:
        return self.rejected_at is None

    def committed(self, draft: list[int]) -> list[int]:
        """Tokens this verdict commits: accepted draft tokens plus the next token."""
        return list(draft[: self.n_accepted]) + [self.next_token]


def mismatch_positions(draft: torch.Tensor, target_argmax: torch.Tensor) -> list[int]:
    """Positions i < K where draft[i] != target_argmax[i].  draft: [K], target_argmax: [K+1]."""
    k = draft.shape[0]
    return torch.nonzero(draft != target_argmax[:k]).flatten().tolist()


def greedy_accept(draft: torch.Tensor, target_logits: torch.Tensor) -> Verdict:
    """Greedy rule: accept up to the first mismatch, then the target's argmax (correction or bonus).

    draft: [K] token ids; target_logits: [K+1, V].
    """
    target_argmax = target_logits.argmax(dim=-1)  # [K+1]
    return greedy_accept_ids(draft, target_argmax)


def greedy_accept_ids(draft: torch.Tensor, target_argmax: torch.Tensor) -> Verdict:
    """Greedy rule on precomputed target argmax ids.  draft: [K]; target_argmax: [K+1]."""
    mism = mismatch_positions(draft, target_argmax)
    r = mism[0] if mism else None
    n = draft.shape[0] if r is None else r
    return Verdict(n, int(target_argmax[n]), tuple(mism), r)


def speculative_sampling_accept(draft: torch.Tensor, q_probs: torch.Tensor, p_probs: torch.Tensor,
                                generator: torch.Generator) -> Verdict:
    """Speculative sampling: accept y_i w.p. min(1, p/q); on rejection sample norm(max(0, p - q)).

    draft: [K]; q_probs: [K, V] drafter distributions the draft was sampled from;
    p_probs: [K+1, V] target distributions.  When all K are accepted the bonus is sampled from
    p_probs[K].  The randomness comes only from ``generator``.
    """
    k = draft.shape[0]
    mism = tuple(mismatch_positions(draft, p_probs.argmax(dim=-1)))
    u = torch.rand(k, generator=generator, dtype=torch.float64)  # [K]
    for i in range(k):
        y = int(draft[i])
        p, q = float(p_probs[i, y]), float(q_probs[i, y])
        if q > 0 and u[i].item() < min(1.0, p / q):
            continue
        residual = torch.clamp(p_probs[i].double() - q_probs[i].double(), min=0.0)  # [V]
        dist = residual if residual.sum() > 0 else p_probs[i].double()
        tok = int(torch.multinomial(dist / dist.sum(), 1, generator=generator))
        return Verdict(i, tok, mism, i)
    bonus = int(torch.multinomial(p_probs[k].double() / p_probs[k].double().sum(), 1, generator=generator))
    return Verdict(k, bonus, mism, None)


def speculative_sampling_from_logits(draft: torch.Tensor, q_probs: torch.Tensor, target_logits: torch.Tensor,
                                     temperature: float, generator: torch.Generator) -> Verdict:
    """Speculative sampling with p = softmax(target_logits / temperature) on the drafter's vocabulary width.

    q_probs: [K, V'] (V' may be smaller than the target's padded vocabulary); target_logits: [K+1, V].
    """
    p = torch.softmax(target_logits[:, : q_probs.shape[-1]].double().to(q_probs.device) / temperature, dim=-1)
    return speculative_sampling_accept(draft, q_probs, p, generator)


def wisv_accept(draft: torch.Tensor, target_argmax: torch.Tensor, reject_probs: torch.Tensor,
                tau: float, eos_token_id: int | None = None) -> Verdict:
    """WISV semantic acceptance (SPEC eq. 27 and rollback rule).

    Only greedy-mismatch positions are candidates; matching positions are always accepted.
    ``reject_probs`` [m] holds the head's rejection probability for each mismatch position, in
    order.  A mismatch is rejected iff p >= tau.  The first rejected position r commits
    draft[:r] (accepted mismatches commit the *draft* token) and the target's argmax at r.
    If none is rejected the whole draft is committed plus the bonus target_argmax[K].
    ``tau = 0`` rejects every mismatch (plain greedy SD); ``tau = inf`` accepts every draft token.
    A mismatching draft EOS (``eos_token_id``: the target would go on) is always rejected: keeping it would end the
    output early, which no token-level harm label sees.
    """
    mism = mismatch_positions(draft, target_argmax)
    if reject_probs.shape[0] != len(mism):
        raise ValueError(f"reject_probs has {reject_probs.shape[0]} entries for {len(mism)} mismatches")
    rejected = [pos for pos, p in zip(mism, reject_probs.tolist())
                if p >= tau or (eos_token_id is not None and int(draft[pos]) == eos_token_id)]
    r = rejected[0] if rejected else None
    n = draft.shape[0] if r is None else r
    return Verdict(n, int(target_argmax[n]), tuple(mism), r)
