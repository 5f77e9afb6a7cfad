"""Text quality against the target-only output: drift (ROUGE-L F1) and fluency (the target's and a third LM's
perplexity ratios).

A lossy protocol (WISV's head keeps some drafter tokens) can keep the task's answer right and still change the
text.  Two measures, each against the target-only greedy output of the same prompt (the reference):

* **drift**: ROUGE-L F1 of the output against the reference (``rouge-score``, stemmed, its default
  tokeniser: lower-cased words of letters and digits).  1.0 for the same text; a synonym swap costs little,
  a word fragment costs a word on each side.
* **fluency**: the target's perplexity on the output over its perplexity on the reference, both given the prompt:
  ``exp(mean NLL(output) - mean NLL(reference))``.  1.0 for the same text; above 1 the target finds the text less
  likely than its own.  Pooled over prompts, the means are over all their tokens.  The reference is the target's
  own greedy text, so this score favours the target's words: any other wording costs, fluent or not.
* **fluency, external** (``fluency_ext_ppl_ratio``): the same ratio with both NLLs from a third model that is
  neither the drafter nor the target (``wisv.pairs.scorer``, on decoded text): how much less fluent the output
  reads than the reference to an independent LM (docs/fluency.md).

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


def pooled_ppl_ratio(nlls: Sequence[Sequence[float]] | None, ref_nlls: Sequence[Sequence[float]] | None) -> float:
    """The perplexity ratio over every token of every text against every token of every reference (nan without
    NLLs).  The same function for either scorer: the NLLs say which model judged."""
    if nlls is None or ref_nlls is None:
        return math.nan
    if len(nlls) != len(ref_nlls):
        raise ValueError(f"{len(nlls)} NLL lists but {len(ref_nlls)} for the references")
    return perplexity_ratio([x for n in nlls for x in n], [x for n in ref_nlls for x in n])


def text_quality(texts: Sequence[str], refs: Sequence[str], nlls: Sequence[Sequence[float]] | None = None,
                 ref_nlls: Sequence[Sequence[float]] | None = None, ext_nlls: Sequence[Sequence[float]] | None = None,
                 ext_ref_nlls: Sequence[Sequence[float]] | None = None) -> dict[str, float]:
    """``drift_rouge_l``: mean ROUGE-L F1 over the texts; ``fluency_ppl_ratio``: the pooled perplexity ratio under the
    target (``nlls``, ``ref_nlls``); ``fluency_ext_ppl_ratio``: the same under the third model (``ext_nlls``,
    ``ext_ref_nlls``); each nan without its NLLs."""
    if len(texts) != len(refs):
        raise ValueError(f"{len(texts)} texts but {len(refs)} references")
    drift = sum(rouge_l_f1(t, r) for t, r in zip(texts, refs)) / len(texts) if texts else math.nan
    return {"drift_rouge_l": drift, "fluency_ppl_ratio": pooled_ppl_ratio(nlls, ref_nlls),
            "fluency_ext_ppl_ratio": pooled_ppl_ratio(ext_nlls, ext_ref_nlls)}


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
