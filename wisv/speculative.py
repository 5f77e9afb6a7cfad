"""In-process speculative decoding loop: draft K, verify K+1 in one target pass, commit, roll back caches.

Cache invariant: for the committed sequence ``seq`` each model's KV cache covers a prefix of
``seq`` and the tokens after it are *pending* (fed at the start of the model's next forward).
The target's cache always covers ``seq[:-1]``, so verification forwards only
``[seq[-1], y_1..y_K]``; after a verdict both caches are cropped back to the committed prefix.
The prefix is never re-run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

import torch
from transformers import DynamicCache, PreTrainedModel

from wisv.acceptance import Verdict, greedy_accept_ids, speculative_sampling_accept, wisv_accept
from wisv.kvcache import crop_to

Rule = Literal["greedy", "sampling", "wisv"]


class MismatchPolicy(Protocol):
    """WISV acceptance policy: rejection probability for each greedy-mismatch position."""

    def reject_probs(self, h_draft: torch.Tensor, h_target: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """h_draft: [m, d_d], h_target: [m, d_t] -> [m] probabilities in [0, 1]."""
        ...


class RejectAll:
    """Rejects every mismatch: the greedy-equivalent policy (``--head none``)."""

    def reject_probs(self, h_draft: torch.Tensor, h_target: torch.Tensor, positions: list[int]) -> torch.Tensor:
        return torch.ones(len(positions))


class AcceptAll:
    """Accepts every mismatch: commits the full draft every round (the accept-everything limit)."""

    def reject_probs(self, h_draft: torch.Tensor, h_target: torch.Tensor, positions: list[int]) -> torch.Tensor:
        return torch.zeros(len(positions))


@dataclass
class RoundRecord:
    """One draft/verify round."""

    round: int
    drafted: int  # K for this round (may shrink near max_new_tokens or at EOS)
    accepted: int  # draft tokens committed (accepted mismatches included for wisv)
    mismatches: list[int]  # greedy-mismatch positions within the block
    next_token: int  # correction token, or bonus when accepted == drafted
    draft_tokens: list[int]
    target_argmax: list[int]  # [drafted + 1]
    committed: list[int]  # tokens appended to the output this round (after EOS/budget truncation)
    reject_probs: list[float] = field(default_factory=list)  # policy outputs at mismatches (wisv)
    h_draft: torch.Tensor | None = None  # [m, d_d] drafter hidden states at the mismatches
    h_target: torch.Tensor | None = None  # [m, d_t] target hidden states at the mismatches


@dataclass
class SpecOutput:
    """New token ids and the per-round records."""

    tokens: list[int]
    rounds: list[RoundRecord]

    @property
    def aal(self) -> float:
        """Accepted draft tokens per round (correction/bonus not counted)."""
        return sum(r.accepted for r in self.rounds) / max(1, len(self.rounds))


@dataclass
class _Model:
    """A model with its KV cache and the committed tokens not yet in the cache."""

    model: PreTrainedModel
    cache: DynamicCache
    cached_len: int = 0

    @torch.no_grad()
    def forward(self, ids: list[int], hidden_layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed ``ids`` after the cache; return logits [n, V] and hidden states [n, d] (float32)."""
        dev = self.model.device
        x = torch.tensor([ids], dtype=torch.long, device=dev)  # [1, n]
        pos = torch.arange(self.cached_len, self.cached_len + len(ids), device=dev)
        out = self.model(input_ids=x, past_key_values=self.cache, use_cache=True, cache_position=pos,
                         position_ids=pos.unsqueeze(0), output_hidden_states=True)
        self.cached_len += len(ids)
        return out.logits[0].float(), out.hidden_states[hidden_layer][0].float()

    def rollback(self, length: int) -> None:
        crop_to(self.cache, length)
        self.cached_len = length


def _draft(d: _Model, seq: list[int], k: int, rule: Rule, eos: int | None, temperature: float,
           gen: torch.Generator | None, hidden_layer: int):
    """Draft up to k tokens.  Returns tokens [k'], drafter probs [k', V] and hidden states [k', d_d]."""
    toks, probs, hids = [], [], []
    feed = seq[d.cached_len:]
    for _ in range(k):
        logits, hidden = d.forward(feed, hidden_layer)
        last = logits[-1]  # [V]
        if rule == "sampling":
            q = torch.softmax(last.double() / temperature, dim=-1)
            y = int(torch.multinomial(q, 1, generator=gen))
            probs.append(q)
        else:
            y = int(last.argmax())
        toks.append(y)
        hids.append(hidden[-1])
        feed = [y]
        if eos is not None and y == eos:
            break
    return toks, (torch.stack(probs) if probs else None), torch.stack(hids) if hids else None


def speculative_generate(drafter: PreTrainedModel, target: PreTrainedModel, prompt_ids: list[int] | torch.Tensor,
                         *, max_new_tokens: int, draft_len: int, rule: Rule = "greedy",
                         eos_token_id: int | None = None, policy: MismatchPolicy | None = None,
                         tau: float = 0.5, temperature: float = 1.0, generator: torch.Generator | None = None,
                         hidden_layer: int = -1) -> SpecOutput:
    """Speculative decoding of ``prompt_ids`` with the drafter proposing ``draft_len`` tokens per round.

    rule: "greedy" (lossless w.r.t. target greedy decoding), "sampling" (speculative sampling at
    ``temperature``; pass a seeded ``generator``), "wisv" (semantic acceptance with ``policy`` and
    threshold ``tau``; RejectAll or tau=0 equals greedy).  Stops at EOS or ``max_new_tokens``.
    ``hidden_layer`` selects which hidden-state layer is recorded (-1: final, post-norm).
    """
    if rule not in ("greedy", "sampling", "wisv"):
        raise ValueError(f"unknown rule {rule!r}; use 'greedy', 'sampling' or 'wisv'")
    if draft_len < 1 or max_new_tokens < 1:
        raise ValueError("draft_len and max_new_tokens must be >= 1")
    if rule == "sampling" and (generator is None or temperature <= 0):
        raise ValueError("rule='sampling' needs a seeded torch.Generator and temperature > 0")
    seq = [int(t) for t in (prompt_ids.flatten().tolist() if torch.is_tensor(prompt_ids) else prompt_ids)]
    if not seq:
        raise ValueError("prompt_ids is empty")
    if eos_token_id is None:
        eos_token_id = target.generation_config.eos_token_id
        eos_token_id = eos_token_id[0] if isinstance(eos_token_id, list) else eos_token_id
    policy = policy or RejectAll()
    d, t = _Model(drafter, DynamicCache()), _Model(target, DynamicCache())
    t.forward(seq[:-1], hidden_layer) if len(seq) > 1 else None  # prefill all but the last token
    d.forward(seq[:-1], hidden_layer) if len(seq) > 1 else None
    n_prompt, rounds = len(seq), []
    while len(seq) - n_prompt < max_new_tokens:
        budget = max_new_tokens - (len(seq) - n_prompt)
        rec = _round(d, t, seq, min(draft_len, budget - 1), rule, eos_token_id, policy, tau, temperature,
                     generator, hidden_layer, len(rounds))
        rounds.append(rec)
        rec.committed = rec.committed[:budget]
        if eos_token_id in rec.committed:
            rec.committed = rec.committed[: rec.committed.index(eos_token_id) + 1]
        seq.extend(rec.committed)
        if rec.committed[-1] == eos_token_id:
            break
    return SpecOutput(seq[n_prompt:], rounds)


def _verdict(rule: Rule, draft: torch.Tensor, q: torch.Tensor | None, logits: torch.Tensor, argmax: torch.Tensor,
             mism_probs: torch.Tensor | None, tau: float, temperature: float, gen) -> Verdict:
    if rule == "sampling":
        q = q if q is not None else logits.new_zeros(0, logits.shape[-1]).double()  # nothing drafted
        v = q.shape[-1]
        p = torch.softmax(logits[:, :v].double() / temperature, dim=-1)  # [K+1, V] on the shared vocab
        return speculative_sampling_accept(draft, q, p, gen)
    if rule == "wisv":
        return wisv_accept(draft, argmax, mism_probs, tau)
    return greedy_accept_ids(draft, argmax)


def _round(d: _Model, t: _Model, seq: list[int], k: int, rule: Rule, eos: int | None, policy: MismatchPolicy,
           tau: float, temperature: float, gen, hidden_layer: int, index: int) -> RoundRecord:
    """Draft, verify in one pass, decide, and roll both caches back to the committed prefix."""
    toks, q, h_d = _draft(d, seq, k, rule, eos, temperature, gen, hidden_layer) if k > 0 else ([], None, None)
    logits, h_t = t.forward([seq[-1]] + toks, hidden_layer)  # [K+1, V], [K+1, d_t]
    draft = torch.tensor(toks, dtype=torch.long, device=logits.device)
    argmax = logits.argmax(dim=-1)  # [K+1]
    mism = torch.nonzero(draft != argmax[: len(toks)]).flatten().tolist()
    hd = h_d[mism] if mism else None
    ht = h_t[mism] if mism else None
    probs = policy.reject_probs(hd, ht, mism) if (rule == "wisv" and mism) else torch.zeros(0)
    v = _verdict(rule, draft, q, logits, argmax, probs, tau, temperature, gen)
    committed = v.committed(toks)
    base = len(seq) - 1  # both caches are rolled back to cover seq + accepted draft tokens
    t.rollback(base + 1 + v.n_accepted)
    d.rollback(min(d.cached_len, base + 1 + v.n_accepted))
    return RoundRecord(index, len(toks), v.n_accepted, mism, v.next_token, toks, argmax.tolist(), committed,
                       [float(x) for x in probs], hd, ht)
