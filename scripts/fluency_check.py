"""Does each fluency score mean something?  Both perplexity ratios on texts whose fluency is known by construction.

For the first N prompts of the SmolLM2 pair's long-form test pool: the target's greedy text is the reference (1.0 on
both scores by definition); against it, the drafter's greedy text (fluent, other words), the reference's words
shuffled (same words, no fluency), and the reference cut into words with every other pair swapped (locally broken).
Prints the pooled ratio of each variant under the target (``fluency_ppl_ratio``) and under the third LM
(``fluency_ext_ppl_ratio``, wisv.pairs.scorer), and writes them as JSON.  Needs ``make pair`` (the pair and the
scorer).  ``python -m scripts.fluency_check --prompts 8 --out results/fluency-check.json``; about 2 minutes on 1 core.
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch

from config import one_line_errors
from wisv.models.loader import load_pair
from wisv.pairs import default_prompts_file, resolve_pair
from wisv.pairs.scorer import load_scorer
from wisv.tasks.evaluate import greedy_reference
from wisv.tasks.prompts import prompt_rows
from wisv.tasks.textquality import pooled_ppl_ratio, token_nll


def shuffled(text: str, seed: int) -> str:
    """The text's words in a seeded random order."""
    words = text.split()
    random.Random(seed).shuffle(words)
    return " ".join(words)


def pair_swapped(text: str) -> str:
    """The text with words 1-2, 3-4, ... swapped: every word kept, local order broken."""
    w = text.split()
    for i in range(0, len(w) - 1, 2):
        w[i], w[i + 1] = w[i + 1], w[i]
    return " ".join(w)


def main() -> None:
    ap = one_line_errors(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    paths = resolve_pair("smollm2")
    pair, ext = load_pair(paths.drafter, paths.target), load_scorer()
    tok = pair.tokenizer
    rows = prompt_rows(tok, "test", args.prompts, default_prompts_file("smollm2"))
    plain = lambda ids: tok.decode(list(ids), skip_special_tokens=True)  # noqa: E731
    texts: dict[str, list[str]] = {k: [] for k in ("reference", "drafter", "pair_swapped", "shuffled")}
    ctxs = []
    for r in rows:
        ref = plain(greedy_reference(pair.target, r["prompt_ids"], args.max_new_tokens))
        texts["reference"].append(ref)
        texts["drafter"].append(plain(greedy_reference(pair.drafter, r["prompt_ids"], args.max_new_tokens)))
        texts["pair_swapped"].append(pair_swapped(ref))
        texts["shuffled"].append(shuffled(ref, len(ctxs)))
        ctxs.append((r["prompt_ids"], plain(r["prompt_ids"])))

    def target_nll(ids, text):
        out = tok(text, add_special_tokens=False).input_ids
        return token_nll(pair.target, [ids], [out])[0] if out else []

    nll = {k: [target_nll(ids, t) for (ids, _), t in zip(ctxs, v)] for k, v in texts.items()}
    ext_nll = {k: [ext(c, t) for (_, c), t in zip(ctxs, v)] for k, v in texts.items()}
    res = {k: {"fluency_ppl_ratio": pooled_ppl_ratio(nll[k], nll["reference"]),
               "fluency_ext_ppl_ratio": pooled_ppl_ratio(ext_nll[k], ext_nll["reference"])} for k in texts}
    print(f"{len(rows)} prompts of the long-form test pool, {args.max_new_tokens} new tokens; "
          f"ratio against the target's greedy text")
    print(f"{'variant':<14} {'target-scored':>14} {'third LM (' + ext.name + ')':>24}")
    for k, v in res.items():
        print(f"{k:<14} {v['fluency_ppl_ratio']:>14.3f} {v['fluency_ext_ppl_ratio']:>24.3f}")
    print(f"example: {texts['reference'][0][:90]!r}\n drafter: {texts['drafter'][0][:90]!r}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"prompts": len(rows), "max_new_tokens": args.max_new_tokens,
                                        "scorer": ext.name, "ratios": res, "texts": texts}, indent=1) + "\n")


if __name__ == "__main__":
    main()
