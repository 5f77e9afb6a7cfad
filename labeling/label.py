"""Stage 2 (label): AutoJudge-style base labels y_j for every collected mismatch.

For mismatch j of an episode: force the drafter's token at j onto the greedy path (the target's own
tokens before j), let the target continue greedily to EOS or the budget, and apply the task checker.
``y_j = 1`` ("critical") iff that outcome differs from the outcome of the unforced target output.  The
checker is pluggable (``module:function`` taking (text, answer) -> bool); the default
``wisv.tasks.qa:check_answer`` checks a QA row's accepted answers, or the toy task's ``#### N``.  Continuations run as left-padded batches (``batched_greedy``).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable

import pandas as pd
import torch
from tqdm import tqdm
from transformers import GenerationConfig, PreTrainedModel

from labeling.config import LabelConfig
from labeling.store import EPISODES, LABELS, load_config, load_traces, require, save_config, stage_path
from wisv.tasks.evaluate import eos_id, mismatch_kind
from wisv.models.loader import load_pair
from wisv.tasks.jsonl import read_jsonl
from wisv.decoding.speculative import truncate_output

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


def label_rows(model, tok, episodes: list[dict], tr: dict, checker: Checker, budget: int, batch: int) -> pd.DataFrame:
    """One row per mismatch: episode, position, kind, critical (y), and the forced text's outcome."""
    rows = []
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    order = list(range(len(tr["episode"])))
    for start in tqdm(range(0, len(order), batch), desc="label (forced continuations)"):
        idx = order[start:start + batch]
        eps = [episodes[int(tr["episode"][i])] for i in idx]
        prefixes = [forced_prefixes(e, [int(tr["position"][i])], [int(tr["draft_id"][i])])[0] for e, i in zip(eps, idx)]
        new_tokens = max(1, budget - min(int(tr["position"][i]) for i in idx) - 1)
        conts = batched_greedy(model, prefixes, new_tokens, pad)
        for i, e, pre, cont in zip(idx, eps, prefixes, conts):
            gen = pre[len(e["prompt_ids"]):] + cont
            forced_ok = bool(checker(tok.decode(gen[:budget]), e["answer"]))
            d, t = int(tr["draft_id"][i]), int(tr["target_id"][i])
            rows.append({"row": i, "episode": int(tr["episode"][i]), "position": int(tr["position"][i]),
                         "draft_id": d, "target_id": t, "kind": mismatch_kind(tok, d, t),
                         "outcome_target": e["outcome"], "outcome_forced": forced_ok,
                         "critical": int(forced_ok != e["outcome"])})
    return pd.DataFrame(rows)


def report(df: pd.DataFrame) -> str:
    """Critical fraction overall and by mismatch kind (number vs wording)."""
    by = df.groupby("kind")["critical"].agg(["count", "mean"])
    lines = [f"label: {len(df)} mismatches, critical fraction {df['critical'].mean():.3f}"]
    lines += [f"  {k:12s} n={int(r['count']):6d} ({r['count'] / len(df):6.1%})  critical {r['mean']:.3f}"
              for k, r in by.iterrows()]
    return "\n".join(lines)


def run(cfg: LabelConfig) -> pd.DataFrame:
    """Label every mismatch of cfg.run_dir's traces; writes labels.csv."""
    torch.set_num_threads(1)
    ccfg = load_config(cfg.run_dir, "collect")
    pair = load_pair(ccfg["drafter"], ccfg["target"], cfg.device)
    checker = resolve_checker(cfg.checker)
    episodes = read_jsonl(require(cfg.run_dir, EPISODES, "collect"))
    for e in episodes:
        e["outcome"] = bool(checker(e["text"], e["answer"]))
    df = label_rows(pair.target, pair.tokenizer, episodes, load_traces(cfg.run_dir), checker,
                    ccfg["max_new_tokens"], cfg.batch)
    df.to_csv(stage_path(cfg.run_dir, LABELS), index=False)
    save_config(cfg.run_dir, "label", cfg, {"critical_fraction": float(df["critical"].mean()),
                                            "target_outcome_rate": sum(e["outcome"] for e in episodes) / len(episodes)})
    print(report(df))
    return df
