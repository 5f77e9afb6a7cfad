"""In-process speculative decoding loop: draft K, verify K+1 in one target pass, commit, roll back caches.

Both models keep a KV cache across rounds (see wisv/decoding/sessions.py); the prefix is never re-run.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import torch
from transformers import PreTrainedModel

from channel.csi import CSI
from wisv.decoding.acceptance import (
    Verdict,
    greedy_accept_ids,
    mismatch_positions,
    speculative_sampling_from_logits,
    wisv_accept,
)
from wisv.decoding.sessions import Block, DraftSession, VerifySession
from wisv.head.features import EdgeFeatures, edge_features
from wisv.head.policy import AcceptAll, MismatchPolicy, RejectAll  # noqa: F401 (re-exported)
from wisv.records.rows import RoundRow, to_frame
from wisv.records.summary import summarize_rounds
from wisv.tasks.evaluate import eos_id

Rule = Literal["greedy", "sampling", "wisv"]


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
    edge: EdgeFeatures | None = None  # the edge's free features at the mismatches (wisv.head.features)


@dataclass
class SpecOutput:
    """New token ids and the per-round records."""

    tokens: list[int]
    rounds: list[RoundRecord]

    @property
    def aal(self) -> float:
        """Accepted draft tokens per round (correction/bonus not counted), by wisv.records.summary (NaN with no
        round)."""
        return summarize_rounds(to_frame(spec_rows(self, "", 0)))["aal"]


def speculative_generate(drafter: PreTrainedModel, target: PreTrainedModel, prompt_ids: list[int] | torch.Tensor,
                         *, max_new_tokens: int, draft_len: int, rule: Rule = "greedy",
                         eos_token_id: int | None = None, policy: MismatchPolicy | None = None,
                         tau: float = 0.5, temperature: float = 1.0, generator: torch.Generator | None = None,
                         hidden_layer: int = -1, csi: CSI | None = None, sibling: bool = False,
                         make_draft: Callable[[list[int]], DraftSession] | None = None,
                         stop: Callable[[torch.Tensor], bool] | None = None, record_edge: bool = True,
                         pad_to: Mapping[int, int] | None = None) -> SpecOutput:
    """Speculative decoding of ``prompt_ids`` with the drafter proposing ``draft_len`` tokens per round.

    rule: "greedy" (lossless w.r.t. target greedy decoding), "sampling" (speculative sampling at
    ``temperature``; pass a seeded ``generator``), "wisv" (semantic acceptance with ``policy`` and
    threshold ``tau``; RejectAll or tau=0 equals greedy).  Stops at EOS or ``max_new_tokens``.
    ``hidden_layer`` selects which hidden-state layer is recorded (-1: final, post-norm); ``csi`` is
    passed to the policy (the link state the decision head conditions on).  ``sibling``: at each mismatch also
    verify the target's own token beside the draft token (one more small pass; the edge features' ``sib_*`` columns,
    wisv/decoding/siblings.py); the decisions read the chain's rows only, so the tokens are the same either way.
    ``make_draft(prompt)``: the UE's DraftSession (default: ``DraftSession(drafter, prompt)``); one that reads target
    features (a FeatureDraftSession) gets the target's final-layer state behind the last committed token after each
    round, as a VERDICT brings it.  ``stop(features [4])``: asked about every drafted token after a block's first
    (wisv.decoding.rejection: ``stop_rule`` of a rejection predictor, ``confidence_stop``); True ends the block there.
    ``record_edge``: compute the edge's free features at each mismatch into ``RoundRecord.edge`` (labeling reads
    them); False leaves them None where nothing reads them, a timing run of a rule that is not wisv (about 2 ms a
    round on the SmolLM2 target's 49k-token vocabulary).  ``pad_to``: a plan that pads a verification pass of n rows to
    ``pad_to[n]`` rows, where the larger pass costs less (VerifySession's; wisv.decoding.passrows); the same tokens.
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
    eos_token_id = eos_id(target) if eos_token_id is None else eos_token_id
    policy = policy or RejectAll()
    d = DraftSession(drafter, seq, hidden_layer) if make_draft is None else make_draft(seq)
    if d.reads_features and hidden_layer != -1:
        raise ValueError("a drafter that reads target features needs the final layer's states (hidden_layer=-1)")
    t = VerifySession(target, seq, hidden_layer, prefill=False, pad_to=pad_to)  # the prompt rides with block 1
    ctx = RoundContext(rule=rule, eos=eos_token_id, policy=policy, tau=tau, temperature=temperature, gen=generator,
                       csi=csi, sibling=sibling, stop=stop, record_edge=record_edge or rule == "wisv")
    out, rounds = [], []
    while len(out) < max_new_tokens:
        budget = max_new_tokens - len(out)
        rec = _round(d, t, min(draft_len, budget - 1), ctx, len(rounds), len(out))
        rounds.append(rec)
        rec.committed = truncate_output(rec.committed, budget, eos_token_id)
        out.extend(rec.committed)
        if rec.committed[-1] == eos_token_id:
            break
    return SpecOutput(out, rounds)


def target_greedy(target: PreTrainedModel, prompt_ids: list[int], *, max_new_tokens: int,
                  eos_token_id: int | None = None) -> list[int]:
    """Target-only greedy decoding through the forward the SD loop uses (wisv.decoding.sessions.cached_forward, with
    its lean pass): the same tokens as ``model.generate``, and a baseline whose forward costs what the loop's does."""
    if max_new_tokens < 1 or not prompt_ids:
        raise ValueError("target_greedy needs a prompt and max_new_tokens >= 1")
    eos_token_id = eos_id(target) if eos_token_id is None else eos_token_id
    t, out = VerifySession(target, list(prompt_ids), prefill=False), []
    while len(out) < max_new_tokens and (not out or out[-1] != eos_token_id):
        out.append(int(t.verify([]).argmax[-1]))
        t.commit([], 0, out[-1])
    return out


def truncate_output(committed: list[int], budget: int, eos_token_id: int | None) -> list[int]:
    """Cut a round's committed tokens at the token budget and just after EOS."""
    committed = committed[:budget]
    if eos_token_id is not None and eos_token_id in committed:
        committed = committed[: committed.index(eos_token_id) + 1]
    return committed


@dataclass(frozen=True, kw_only=True)
class RoundContext:
    """What every round of one speculative run shares."""

    rule: Rule  # acceptance rule: greedy | sampling | wisv
    eos: int | None  # EOS token id (None: none)
    policy: MismatchPolicy  # decides each mismatch (wisv)
    tau: float  # decision threshold: reject a mismatch iff p >= tau (wisv)
    temperature: float  # sampling temperature (sampling)
    gen: torch.Generator | None  # seeded generator (sampling)
    csi: CSI | None  # the link state the policy conditions on
    sibling: bool = False  # verify the target's own token beside each mismatching draft token (edge sib_* features)
    stop: Callable[[torch.Tensor], bool] | None = None  # DraftSession.draft's stop: ends a block early (None: K always)
    record_edge: bool = True  # edge features at each mismatch into the record (wisv's policy reads them too)


def _verdict(ctx: RoundContext, *, draft: torch.Tensor, q: torch.Tensor | None, block: Block,
             mism_probs: torch.Tensor, tau: float) -> Verdict:
    """The round's acceptance under the run's rule: the ``draft`` [K] against the target's ``block``; ``q`` [K, V]: the
    drafter's probabilities (sampling), ``mism_probs`` [m]: the policy's rejection probabilities (wisv)."""
    if ctx.rule == "sampling":
        q = q if q is not None else block.logits.new_zeros(0, block.logits.shape[-1]).double()  # nothing drafted
        return speculative_sampling_from_logits(draft, q, block.logits, ctx.temperature, ctx.gen)
    if ctx.rule == "wisv":
        return wisv_accept(draft, block.argmax, mism_probs, tau, ctx.eos)
    return greedy_accept_ids(draft, block.argmax)


def _round(d: DraftSession, t: VerifySession, k: int, ctx: RoundContext, index: int, out_len: int) -> RoundRecord:
    """Draft, verify in one pass, decide, and roll both caches back to the committed prefix (``out_len``: tokens
    generated before this round)."""
    rule, gen = ctx.rule, ctx.gen
    dr = d.draft(k, sample=rule == "sampling", temperature=ctx.temperature, generator=gen, eos_token_id=ctx.eos,
                 stop=ctx.stop, features=False)  # no wire here: the block's predictor features go unread
    blk = t.verify(dr.tokens)
    draft = torch.tensor(dr.tokens, dtype=torch.long, device=blk.argmax.device)  # [K]
    mism = mismatch_positions(draft, blk.argmax)
    hd = dr.hidden[mism] if mism and dr.hidden is not None else None  # [m, d_d] (a model-free draft has none)
    ht = blk.hidden[mism] if mism else None  # [m, d_t]
    sib = t.verify_siblings(dr.tokens, mism, blk.argmax[mism].tolist()) if (ctx.sibling and mism) else None
    ef = edge_features(blk.logits.cpu(), blk.hidden.cpu(), dr.tokens, mism, sib, out_len) if (
        mism and ctx.record_edge) else None
    probs = ctx.policy.reject_probs(hd, ht, mism, ctx.csi, ef) if (rule == "wisv" and mism) else torch.zeros(0)
    tau = ctx.policy.threshold(ctx.tau, ctx.csi)
    v = _verdict(ctx, draft=draft, q=dr.probs, block=blk, mism_probs=probs, tau=tau)
    committed = t.commit(dr.tokens, v.n_accepted, v.next_token)
    d.commit(committed)
    if d.reads_features:  # block row n_accepted: the state whose LM head gave the next token (the VERDICT's rows)
        rows = blk.hidden[max(0, v.n_accepted + 1 - d.reads_features): v.n_accepted + 1]  # [n, d_t]
        d.take_features(rows.float().cpu())
    return RoundRecord(index, len(dr.tokens), v.n_accepted, mism, v.next_token, dr.tokens, blk.argmax.tolist(),
                       committed, [float(x) for x in probs], hd, ht, ef)


def spec_rows(out: SpecOutput, prompt_id: str, prompt_len: int, correct: bool | None = None) -> list[RoundRow]:
    """The records of one in-process speculative run, with each round's prefix length."""
    rows, prefix = [], prompt_len
    for r in out.rounds:
        rows.append(RoundRow(prompt_id=prompt_id, round=r.round, drafted=r.drafted, accepted=r.accepted,
                             mismatches=len(r.mismatches), committed=len(r.committed), prefix_len=prefix,
                             prompt_len=prompt_len, n_tokens=len(out.tokens), correct=correct))
        prefix += len(r.committed)
    return rows
