"""Lossless at scale: chain and tree speculative decoding against target greedy, divergences certified as near-ties.

A near-tie in bf16 is wider than the fp32 tests' 1e-4 (wisv.decoding.lossless.NEAR_TIE_GAP): the target scores a block
of K positions in one pass and a single token in another, and in bf16 (8 significant bits) the two sums round
differently by a few units in the last place (ulp) of the logit.  A divergence is certified when the two tokens' logits
differ by at most ``NEAR_TIE_ULPS`` ulps of the larger one, in the target's full forward over the common prefix.
"""
from __future__ import annotations

import math

import torch
from transformers import PreTrainedModel

from wisv.decoding.lossless import NEAR_TIE_GAP, first_divergence
from wisv.decoding.speculative import speculative_generate
from wisv.decoding.treespec import tree_generate
from wisv.tasks.evaluate import greedy_reference

NEAR_TIE_ULPS = 4  # bf16/fp16: tokens this many ulps of the top logit apart count as tied
MANTISSA_BITS = {torch.bfloat16: 7, torch.float16: 10}  # explicit mantissa bits of the reduced-precision dtypes


def near_tie_tolerance(dtype: torch.dtype, top_logit: float) -> float:
    """The largest logit gap that is a near-tie in ``dtype`` at a logit of magnitude ``top_logit``."""
    bits = MANTISSA_BITS.get(dtype)
    if bits is None:
        return NEAR_TIE_GAP
    ulp = 2.0 ** (math.floor(math.log2(max(abs(top_logit), 2.0 ** -14))) - bits)
    return max(NEAR_TIE_GAP, NEAR_TIE_ULPS * ulp)


@torch.no_grad()
def certify(target: PreTrainedModel, prompt: list[int], reference: list[int], got: list[int]) -> dict:
    """Compare ``got`` with the target's greedy ``reference``; at a divergence, the two tokens' logit gap."""
    pos = first_divergence(reference, got)
    if pos is None:
        return {"identical": True, "ok": True}
    if pos >= min(len(reference), len(got)):
        return {"identical": False, "ok": False, "position": pos, "why": "lengths differ"}
    x = torch.tensor([prompt + reference[:pos]], device=target.device)
    logits = target(input_ids=x).logits[0, -1].float()  # [V]
    a, b = float(logits[reference[pos]]), float(logits[got[pos]])
    tol = near_tie_tolerance(target.dtype, max(abs(a), abs(b)))
    return {"identical": False, "ok": abs(a - b) <= tol, "position": pos, "gap": abs(a - b), "tolerance": tol,
            "reference_token": reference[pos], "got_token": got[pos]}


def run_lossless(target: PreTrainedModel, drafter: PreTrainedModel, prompts: list[list[int]], new_tokens: int,
                 draft_len: int, tree_budget: int) -> dict:
    """Chain (K = ``draft_len``) and tree (``tree_budget`` tokens) SD on every prompt against target greedy."""
    per, aal = [], {"chain": [], "tree": []}
    rejected = {"chain": 0, "tree": 0}
    for i, prompt in enumerate(prompts):
        ref = greedy_reference(target, prompt, new_tokens)
        chain = speculative_generate(drafter, target, prompt, max_new_tokens=new_tokens, draft_len=draft_len)
        tree = tree_generate(drafter, target, prompt, max_new_tokens=new_tokens, budget=tree_budget)
        for name, out in (("chain", chain), ("tree", tree)):
            aal[name].append(out.aal)
            rejected[name] += sum(r.accepted < (r.drafted if name == "chain" else r.depth) for r in out.rounds)
        per.append({"prompt": i, "reference_tokens": len(ref), "chain": certify(target, prompt, ref, chain.tokens),
                    "tree": certify(target, prompt, ref, tree.tokens)})
    out = {"prompts": len(prompts), "new_tokens": new_tokens, "draft_len": draft_len, "tree_budget": tree_budget,
           "per_prompt": per}
    for name in ("chain", "tree"):
        out[name] = {"identical": sum(p[name]["identical"] for p in per),
                     "ok_with_near_ties": sum(p[name]["ok"] for p in per),
                     "aal": sum(aal[name]) / len(aal[name]), "rounds_with_rejection": rejected[name]}
    out["ok"] = all(p[n]["ok"] for p in per for n in ("chain", "tree"))
    return out
