"""Stage 2 (label): base labels y_j for every collected mismatch: does forcing the draft token harm the output?

For mismatch j of an episode: force the drafter's token at j onto the greedy path (the target's own
tokens before j), let the target continue greedily to EOS or the budget, and apply the task checker.
``y_j = harmful`` (labeling/harm.py): the forced output turns the target's right answer wrong, or the target
finds the forced token and its continuation far less likely than its own tokens there (perplexity ratio over
``fluency_window`` tokens above ``max_ppl_ratio``).  A draft that turns a wrong answer right is ``helpful``,
counted apart and never harmful; ``changed`` keeps the earlier either-direction label for comparison.  The
checker is pluggable (``module:function`` taking (text, answer) -> bool); the default
``wisv.tasks.qa:check_answer`` checks a QA row's accepted answers, or the toy task's ``#### N``.  Continuations
run as left-padded batches (``batched_greedy``) and are scored in one right-padded forward per batch
(``wisv.tasks.textquality.token_nll``), on ``threads`` torch threads.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable

import pandas as pd
import torch
from tqdm import tqdm
from transformers import GenerationConfig, PreTrainedModel

from labeling.config import LabelConfig
from labeling.harm import harm_label, window_ppl_ratio
from labeling.store import EPISODES, LABELS, load_config, load_traces, require, save_config, stage_path
from wisv.tasks.evaluate import eos_id, mismatch_kind
from wisv.models.loader import load_pair
from wisv.tasks.jsonl import read_jsonl
from wisv.decoding.speculative import truncate_output
from wisv.tasks.textquality import token_nll

Checker = Callable[[str, object], bool]


def resolve_checker(spec: str) -> Checker:
    """``module:function`` -> the function; a clear error when it cannot be imported."""
    mod, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f"checker {spec!r}: cannot import ({e}); use module:function") from e
    if not callable(fn):
        raise ValueError(f"checker {spec!r} is not callable")
    return fn


@torch.no_grad()
def batched_greedy(model: PreTrainedModel, prefixes: list[list[int]], max_new_tokens: int, pad_id: int) -> list[list[int]]:
    """Greedy continuations of several prefixes in one left-padded batch (new tokens only, cut after EOS)."""
    width = max(len(p) for p in prefixes)
    ids = torch.full((len(prefixes), width), pad_id, dtype=torch.long)  # [B, S]
    mask = torch.zeros_like(ids)  # [B, S]
    for i, p in enumerate(prefixes):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    eos = eos_id(model)
    cfg = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos, pad_token_id=pad_id)
    out = model.generate(ids.to(model.device), attention_mask=mask.to(model.device), generation_config=cfg)
    return [truncate_output(row[width:].tolist(), max_new_tokens, eos) for row in out]


def forced_prefixes(episode: dict, positions: list[int], draft_ids: list[int]) -> list[list[int]]:
    """prompt + target greedy tokens before j + the draft token at j, for each mismatch j."""
    out = episode["output_ids"]
    return [episode["prompt_ids"] + out[:j] + [d] for j, d in zip(positions, draft_ids)]


def own_nll(model, episodes: list[dict], wanted: set[int], cache: dict[int, list[float]], pad: int) -> None:
    """Fill cache[e] with the target's per-token NLL of episode e's own output, for the wanted episodes not in it."""
    todo = sorted(wanted - cache.keys())
    if todo:
        nlls = token_nll(model, [episodes[e]["prompt_ids"] for e in todo], [episodes[e]["output_ids"] for e in todo], pad)
        cache.update(zip(todo, nlls))


def subsample(n: int, limit: int | None) -> list[int]:
    """Every k-th of n mismatches (trace order), k the smallest stride that keeps at most ``limit``: a sample spread
    over every episode; all of them when limit is None."""
    if limit is None or limit >= n:
        return list(range(n))
    if limit < 1:
        raise ValueError(f"--limit must be >= 1, got {limit}")
    return list(range(0, n, -(-n // limit)))


def label_rows(model, tok, episodes: list[dict], tr: dict, checker: Checker, budget: int, cfg: LabelConfig) -> pd.DataFrame:
    """One row per mismatch: episode, position, kind, both outcomes, the window perplexity ratio and the harm label."""
    rows, own = [], {}
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    order = sorted(subsample(len(tr["episode"]), cfg.limit), key=lambda i: int(tr["position"][i]))  # like lengths
    for start in tqdm(range(0, len(order), cfg.batch), desc="label (forced continuations)"):
        idx = order[start:start + cfg.batch]
        eps = [episodes[int(tr["episode"][i])] for i in idx]
        pos = [int(tr["position"][i]) for i in idx]
        prefixes = [forced_prefixes(e, [j], [int(tr["draft_id"][i])])[0] for e, i, j in zip(eps, idx, pos)]
        new_tokens = max(1, budget - min(pos) - 1)
        conts = batched_greedy(model, prefixes, new_tokens, pad)
        gens = [pre[len(e["prompt_ids"]):] + cont for e, pre, cont in zip(eps, prefixes, conts)]
        forced_nll = token_nll(model, [e["prompt_ids"] + e["output_ids"][:j] for e, j in zip(eps, pos)],
                               [g[j:j + cfg.fluency_window] for g, j in zip(gens, pos)], pad)
        own_nll(model, episodes, {int(tr["episode"][i]) for i in idx}, own, pad)
        for i, e, j, gen, fn in zip(idx, eps, pos, gens, forced_nll):
            forced_ok = bool(checker(tok.decode(gen[:budget]), e["answer"]))
            ratio = window_ppl_ratio(fn, own[int(tr["episode"][i])][j:j + cfg.fluency_window], cfg.fluency_window)
            d, t = int(tr["draft_id"][i]), int(tr["target_id"][i])
            rows.append({"row": i, "episode": int(tr["episode"][i]), "position": j,
                         "draft_id": d, "target_id": t, "kind": mismatch_kind(tok, d, t),
                         "outcome_target": e["outcome"], "outcome_forced": forced_ok, "ppl_ratio": ratio,
                         **harm_label(e["outcome"], forced_ok, ratio, cfg.max_ppl_ratio)})
    return pd.DataFrame(rows).sort_values("row", ignore_index=True)


def report(df: pd.DataFrame) -> str:
    """Harmful, helpful and either-direction fractions, overall and by mismatch kind (number vs wording)."""
    cols = [c for c in ("harmful", "turns_wrong", "disfluent", "helpful", "changed") if c in df]
    lines = [f"label: {len(df)} mismatches in {df['episode'].nunique() if 'episode' in df else '?'} episodes; "
             + ", ".join(f"{c} {df[c].mean():.3f}" for c in cols)]
    for k, g in df.groupby("kind"):
        lines.append(f"  {k:12s} n={len(g):6d} ({len(g) / len(df):6.1%})  "
                     + "  ".join(f"{c} {g[c].mean():.3f}" for c in cols))
    return "\n".join(lines)


def run(cfg: LabelConfig) -> pd.DataFrame:
    """Label every mismatch of cfg.run_dir's traces; writes labels.csv."""
    torch.set_num_threads(cfg.threads)
    ccfg = load_config(cfg.run_dir, "collect")
    pair = load_pair(ccfg["drafter"], ccfg["target"], cfg.device)
    checker = resolve_checker(cfg.checker)
    episodes = read_jsonl(require(cfg.run_dir, EPISODES, "collect"))
    for e in episodes:
        e["outcome"] = bool(checker(e["text"], e["answer"]))
    df = label_rows(pair.target, pair.tokenizer, episodes, load_traces(cfg.run_dir), checker,
                    ccfg["max_new_tokens"], cfg)
    df.to_csv(stage_path(cfg.run_dir, LABELS), index=False)
    save_config(cfg.run_dir, "label", cfg, {**{f"{c}_fraction": float(df[c].mean()) for c in
                                               ("harmful", "turns_wrong", "disfluent", "helpful", "changed")},
                                            "harmful": int(df["harmful"].sum()), "helpful": int(df["helpful"].sum()),
                                            "target_outcome_rate": sum(e["outcome"] for e in episodes) / len(episodes)})
    print(report(df))
    return df
