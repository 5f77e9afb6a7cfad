"""Text quality against the target-only output: drift (ROUGE-L F1) and fluency (the target's perplexity ratio).

A lossy protocol (WISV's head keeps some drafter tokens) can keep the task's answer right and still change the
text.  Two measures, each against the target-only greedy output of the same prompt (the reference):

* **drift**: ROUGE-L F1 of the output against the reference (``rouge-score``, stemmed, its default
  tokeniser: lower-cased words of letters and digits).  1.0 for the same text; a synonym swap costs little,
  a word fragment costs a word on each side.
* **fluency**: the target's perplexity on the output over its perplexity on the reference, both given the prompt:
  ``exp(mean NLL(output) - mean NLL(reference))``.  1.0 for the same text; above 1 the target finds the text less
  likely than its own.  Pooled over prompts, the means are over all their tokens.

``text_quality`` and the ratio are pure; ``token_nll`` runs the target once per batch of sequences.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import torch
from transformers import PreTrainedModel


@lru_cache(maxsize=1)
def _scorer():
    from rouge_score import rouge_scorer  # the maintained reference implementation of ROUGE

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l_f1(text: str, reference: str) -> float:
    """ROUGE-L F1 of ``text`` against ``reference`` in [0, 1] (1.0 for two empty texts)."""
    if not text.strip() and not reference.strip():
        return 1.0
    return float(_scorer().score(reference, text)["rougeL"].fmeasure)


def perplexity_ratio(nll: Sequence[float], nll_ref: Sequence[float]) -> float:
    """exp(mean nll - mean nll_ref): the perplexity on a text over that on its reference (nan if either is empty)."""
    if len(nll) == 0 or len(nll_ref) == 0:
        return math.nan
    return math.exp(sum(nll) / len(nll) - sum(nll_ref) / len(nll_ref))


def text_quality(texts: Sequence[str], refs: Sequence[str], nlls: Sequence[Sequence[float]] | None = None,
                 ref_nlls: Sequence[Sequence[float]] | None = None) -> dict[str, float]:
    """``drift_rouge_l``: mean ROUGE-L F1 over the texts; ``fluency_ppl_ratio``: the pooled perplexity ratio (nan
    without per-token NLLs)."""
    if len(texts) != len(refs):
        raise ValueError(f"{len(texts)} texts but {len(refs)} references")
    drift = sum(rouge_l_f1(t, r) for t, r in zip(texts, refs)) / len(texts) if texts else math.nan
    flu = math.nan
    if nlls is not None and ref_nlls is not None:
        flu = perplexity_ratio([x for n in nlls for x in n], [x for n in ref_nlls for x in n])
    return {"drift_rouge_l": drift, "fluency_ppl_ratio": flu}


@torch.no_grad()
def token_nll(model: PreTrainedModel, prompts: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
              pad_id: int = 0, queries: Sequence[Sequence[tuple[int, int]]] | None = None):
    """Per-token NLL (nats) of each output given its prompt under ``model``: one right-padded forward per call.  With
    ``queries`` (per sequence, (position, token id) pairs) also the NLL of each queried token as the next token after
    that position of prompt + output, from the same pass: returns ``(nlls, query_nlls)``."""
    seqs = [list(p) + list(o) for p, o in zip(prompts, outputs)]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)  # [B, S]
    mask = torch.zeros_like(ids)  # [B, S]
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
    logp = model(input_ids=ids.to(model.device), attention_mask=mask.to(model.device)).logits.float().log_softmax(-1)
    out = []
    for i, (p, o) in enumerate(zip(prompts, outputs)):
        pos = torch.arange(len(p) - 1, len(p) + len(o) - 1)  # [n_out] positions predicting the output tokens
        tgt = torch.tensor(list(o), dtype=torch.long)  # [n_out]
        out.append((-logp[i, pos, tgt]).tolist())
    if queries is None:
        return out
    extra = []
    for i, q in enumerate(queries):
        for at, _ in q:
            if not 0 <= at < len(seqs[i]):
                raise ValueError(f"query position {at} outside sequence {i} of length {len(seqs[i])}")
        extra.append([-float(logp[i, at, t]) for at, t in q])
    return out, extra
