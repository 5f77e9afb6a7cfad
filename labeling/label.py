"""Stage 2 (label): base labels y_j for every collected mismatch: does forcing the draft token harm the output?

For mismatch j of an episode: force the drafter's token at j onto the greedy path (the target's own
tokens before j), let the target continue greedily to EOS or the budget, and apply the task checker.
``y_j = harmful`` (labeling/harm.py): the forced output turns the target's right answer wrong, or the target
finds the forced token and its continuation far less likely than its own tokens there (perplexity ratio over
``fluency_window`` tokens above ``max_ppl_ratio``).  A draft that turns a wrong answer right is ``helpful``,
counted apart and never harmful; ``changed`` keeps the earlier either-direction label for comparison.  The
checker is pluggable (``module:function`` taking (text, answer) -> bool); the default
``wisv.tasks.qa:check_answer`` checks a QA row's accepted answers, or the toy task's ``#### N``.  Where the
target's tokens before j already settle the outcome (a complete first sentence that states the answer:
``wisv.tasks.qa:answer_settled``), only the fluency window is generated.  Two engines give the same labels
(up to float noise): ``cached`` (the default; labeling/forced.py) runs one forward per episode and starts every
forced continuation from its KV cache; ``batched`` (last round's) re-prefills prompt + prefix + draft token for
every mismatch in left-padded batches (``batched_greedy``) and takes the draft token's NLL from a right-padded
forward per episode (``wisv.tasks.textquality.token_nll``).  Either way the decode's own logits score the forced
window; all on ``threads`` torch threads.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import torch
from tqdm import tqdm
from transformers import GenerationConfig, PreTrainedModel

from labeling.config import LabelConfig
from labeling.forced import Forced, Job, forced_cached
from labeling.harm import harm_label, window_ppl_ratio
from labeling.store import EPISODES, LABELS, load_config, load_traces, require, save_config, stage_path
from wisv.decoding.speculative import truncate_output
from wisv.models.loader import ModelPair, load_pair
from wisv.tasks.evaluate import eos_id, mismatch_kind
from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.qa import answer_settled, check_answer
from wisv.tasks.textquality import token_nll

DEFAULT_CHECKER = "wisv.tasks.qa:check_answer"
Checker = Callable[[str, object], bool]
Settled = Callable[[str, object], bool]  # (prefix text, answer) -> the verdict is True whatever follows
BUILTIN_CHECKERS: dict[str, Checker] = {DEFAULT_CHECKER: check_answer, "wisv.tasks.qa:answer_settled": answer_settled}


def resolve_settled(spec: str, checker_spec: str) -> Settled | None:
    """The settled-prefix test: ``auto`` is ``wisv.tasks.qa:answer_settled`` for the default checker and none for any
    other; ``none`` rolls out every mismatch; else ``module:function``."""
    if spec == "none" or (spec == "auto" and checker_spec != DEFAULT_CHECKER):
        return None
    return free_form_aware(resolve_checker("wisv.tasks.qa:answer_settled" if spec == "auto" else spec))


def free_form_aware(fn: Checker) -> Checker:
    """A checker (or settled test) that holds for a free-form row (answer None: nothing to check), so that its
    mismatches are labelled by fluency alone and generate only the fluency window."""
    return lambda text, answer: True if answer is None else fn(text, answer)


def resolve_checker(spec: str) -> Checker:
    """``module:function`` -> the function (the project's own, BUILTIN_CHECKERS, by an ordinary import; a
    researcher's module by name); a clear error when it cannot be imported."""
    if spec in BUILTIN_CHECKERS:
        return BUILTIN_CHECKERS[spec]
    mod, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f"checker {spec!r}: cannot import ({e}); use module:function") from e
    if not callable(fn):
        raise ValueError(f"checker {spec!r} is not callable")
    return fn


@torch.no_grad()
def batched_greedy(model: PreTrainedModel, prefixes: list[list[int]], max_new_tokens: int, pad_id: int,
                   with_nll: bool = False):
    """Greedy continuations of several prefixes in one left-padded batch (new tokens only, cut after EOS); with
    ``with_nll`` also each continuation token's NLL under the model (from the generation's own logits: no second
    pass), as ``(continuations, nlls)``."""
    width = max(len(p) for p in prefixes)
    ids = torch.full((len(prefixes), width), pad_id, dtype=torch.long)  # [B, S]
    mask = torch.zeros_like(ids)  # [B, S]
    for i, p in enumerate(prefixes):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    eos = eos_id(model)
    cfg = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos, pad_token_id=pad_id,
                           output_logits=with_nll, return_dict_in_generate=True)
    res = model.generate(ids.to(model.device), attention_mask=mask.to(model.device), generation_config=cfg)
    conts = [truncate_output(row[width:].tolist(), max_new_tokens, eos) for row in res.sequences]
    if not with_nll:
        return conts
    logp = torch.stack(res.logits, 1).float().log_softmax(-1)  # [B, steps, V]
    nlls = [(-logp[b, torch.arange(len(c)), torch.tensor(c, dtype=torch.long)]).tolist() for b, c in enumerate(conts)]
    return conts, nlls


def forced_prefixes(episode: dict, positions: list[int], draft_ids: list[int]) -> list[list[int]]:
    """prompt + target greedy tokens before j + the draft token at j, for each mismatch j."""
    out = episode["output_ids"]
    return [episode["prompt_ids"] + out[:j] + [d] for j, d in zip(positions, draft_ids)]


def own_nll(model, episodes: list[dict], wanted: set[int], cache: dict[int, list[float]], pad: int,
            drafts: dict[int, list[tuple[int, int]]] | None = None, draft_cache: dict | None = None) -> None:
    """Fill cache[e] with the target's per-token NLL of episode e's own output, for the wanted episodes not in it;
    with ``drafts`` ({e: [(position, draft id)]}) also draft_cache[(e, position, draft id)]: the NLL of that draft
    token where the target put its own, from the same forward pass."""
    todo = sorted(wanted - cache.keys())
    if not todo:
        return
    prompts, outputs = [episodes[e]["prompt_ids"] for e in todo], [episodes[e]["output_ids"] for e in todo]
    queries = [[(len(p) + j - 1, d) for j, d in (drafts or {}).get(e, [])] for e, p in zip(todo, prompts)]
    nlls, extra = token_nll(model, prompts, outputs, pad, queries=queries)
    cache.update(zip(todo, nlls))
    if draft_cache is not None:
        for e, vals in zip(todo, extra):
            draft_cache.update({(e, j, d): v for (j, d), v in zip(drafts.get(e, []), vals)})


def subsample(n: int, limit: int | None) -> list[int]:
    """Every k-th of n mismatches (trace order), k the smallest stride that keeps at most ``limit``: a sample spread
    over every episode; all of them when limit is None."""
    if limit is None or limit >= n:
        return list(range(n))
    if limit < 1:
        raise ValueError(f"--limit must be >= 1, got {limit}")
    return list(range(0, n, -(-n // limit)))


def rollout_plan(tok, episodes: list[dict], tr: dict, order: list[int], settled: Settled | None) -> list[bool]:
    """Per mismatch of ``order``: True where the checker's verdict on the forced output is already known from the
    target's tokens before it (``settled`` on their text), so only the fluency window needs generating."""
    if settled is None:
        return [False] * len(order)
    out = []
    for i in order:
        e, j = episodes[int(tr["episode"][i])], int(tr["position"][i])
        out.append(bool(e["outcome"]) and bool(settled(tok.decode(e["output_ids"][:j]), e["answer"])))
    return out


def forced_batched(model, episodes: list[dict], jobs: list[Job], batch: int, pad: int) -> list[Forced]:
    """Every job's forced continuation by the batched engine (last round's): ``batch`` jobs at a time in one
    left-padded ``batched_greedy`` over prompt + prefix + draft token, each generating the batch's most steps; the
    draft token's NLL from a right-padded forward over each new episode (``own_nll``)."""
    own, draft_nll, out = {}, {}, []
    drafts: dict[int, list[tuple[int, int]]] = {}
    for job in jobs:
        drafts.setdefault(job.episode, []).append((job.position, job.draft_id))
    for start in tqdm(range(0, len(jobs), batch), desc="label (forced continuations, batched)"):
        chunk = jobs[start:start + batch]
        prefixes = [forced_prefixes(episodes[j.episode], [j.position], [j.draft_id])[0] for j in chunk]
        conts, cont_nll = batched_greedy(model, prefixes, max(j.steps for j in chunk), pad, with_nll=True)
        own_nll(model, episodes, {j.episode for j in chunk}, own, pad, drafts, draft_nll)
        out += [Forced(c, n, draft_nll[(j.episode, j.position, j.draft_id)], own[j.episode])
                for j, c, n in zip(chunk, conts, cont_nll)]
    return out


def label_rows(model, tok, episodes: list[dict], tr: dict, checker: Checker, budget: int, cfg: LabelConfig,
               settled: Settled | None = None) -> pd.DataFrame:
    """One row per mismatch: episode, position, kind, both outcomes, the window perplexity ratio and the harm label
    (see ``force`` for how the forced continuations run)."""
    order, short, forced = force(model, tok, episodes, tr, budget, cfg, settled)
    rows = [label_row(tok, episodes, tr, i, f, checker, budget, cfg, short[i]) for i, f in zip(order, forced)]
    return pd.DataFrame(rows).sort_values("row", ignore_index=True)


def force(model, tok, episodes: list[dict], tr: dict, budget: int, cfg: LabelConfig,
          settled: Settled | None = None) -> tuple[list[int], dict[int, bool], list[Forced]]:
    """The forced continuation of every picked mismatch (``cfg.limit``): (trace rows in the order forced, whether
    each is settled, their ``Forced``).  Mismatches whose outcome is settled before them (``settled``) generate
    only the fluency window; the rest run to EOS or the budget, and at least the window (so a ratio near the budget
    does not depend on the batch: last round's code read fewer tokens there when no row of its batch went
    further).  ``cfg.engine``: cached (labeling/forced.py) or batched (``forced_batched``)."""
    picked = subsample(len(tr["episode"]), cfg.limit)
    short = dict(zip(picked, rollout_plan(tok, episodes, tr, picked, settled)))
    window = max(1, cfg.fluency_window - 1)  # tokens after the draft token that the ratio reads
    steps = {i: window if short[i] else max(window, budget - int(tr["position"][i]) - 1) for i in picked}
    if cfg.engine == "batched":  # window-only first, like lengths: each batch generates its longest row's steps
        order = sorted(picked, key=lambda i: (not short[i], int(tr["position"][i])))
        jobs = [_job(tr, i, steps[i]) for i in order]
        return order, short, forced_batched(model, episodes, jobs, cfg.batch, tok.pad_token_id or 0)
    return picked, short, forced_cached(model, episodes, [_job(tr, i, steps[i]) for i in picked], cfg.batch)


def _job(tr: dict, i: int, steps: int) -> Job:
    return Job(int(tr["episode"][i]), int(tr["position"][i]), int(tr["draft_id"][i]), steps)


def label_row(tok, episodes: list[dict], tr: dict, i: int, f: Forced, checker: Checker, budget: int,
              cfg: LabelConfig, short: bool) -> dict:
    """Mismatch i's row from its forced continuation: the checker on the forced output, the window ratio, labels."""
    ep, j, d, t = int(tr["episode"][i]), int(tr["position"][i]), int(tr["draft_id"][i]), int(tr["target_id"][i])
    e = episodes[ep]
    gen = e["output_ids"][:j] + [d] + f.cont
    forced_ok = bool(checker(tok.decode(gen[:budget]), e["answer"]))
    ratio = window_ppl_ratio([f.nll_draft] + f.cont_nll, f.own_nll[j:j + cfg.fluency_window], cfg.fluency_window)
    return {"row": i, "episode": ep, "position": j, "draft_id": d, "target_id": t, "kind": mismatch_kind(tok, d, t),
            "settled": int(short), "nll_draft": f.nll_draft, "nll_target": f.own_nll[j],
            "outcome_target": e["outcome"], "outcome_forced": forced_ok, "ppl_ratio": ratio,
            **harm_label(e["outcome"], forced_ok, ratio, cfg.max_ppl_ratio)}


def report(df: pd.DataFrame) -> str:
    """Harmful, helpful and either-direction fractions, overall and by mismatch kind (number vs wording)."""
    cols = [c for c in ("harmful", "turns_wrong", "disfluent", "helpful", "changed") if c in df]
    lines = [f"label: {len(df)} mismatches in {df['episode'].nunique() if 'episode' in df else '?'} episodes; "
             + ", ".join(f"{c} {df[c].mean():.3f}" for c in cols)]
    for k, g in df.groupby("kind"):
        lines.append(f"  {k:12s} n={len(g):6d} ({len(g) / len(df):6.1%})  "
                     + "  ".join(f"{c} {g[c].mean():.3f}" for c in cols))
    return "\n".join(lines)


@dataclass
class Inputs:
    """What the label stage reads: the pair, the collect run and the task's checker."""

    pair: ModelPair  # drafter, target and tokenizer of the collect stage
    episodes: list[dict]  # episodes.jsonl rows, each with its target ``outcome`` under the checker
    traces: dict  # traces.npz arrays (one row per mismatch)
    checker: Checker  # the task checker (free-form rows pass)
    budget: int  # collect's generation budget, tokens
    settled: Settled | None  # the settled-prefix test


def load_inputs(cfg: LabelConfig) -> Inputs:
    """Load cfg.run_dir's collect output, its pair and the checker; set torch's threads."""
    torch.set_num_threads(cfg.threads)
    ccfg = load_config(cfg.run_dir, "collect")
    checker = free_form_aware(resolve_checker(cfg.checker))
    episodes = read_jsonl(require(cfg.run_dir, EPISODES, "collect"))
    for e in episodes:
        e["outcome"] = bool(checker(e["text"], e["answer"]))
    return Inputs(load_pair(ccfg["drafter"], ccfg["target"], cfg.device), episodes, load_traces(cfg.run_dir), checker,
                  ccfg["max_new_tokens"], resolve_settled(cfg.settled, cfg.checker))


def run(cfg: LabelConfig) -> pd.DataFrame:
    """Label every mismatch of cfg.run_dir's traces; writes labels.csv."""
    inp = load_inputs(cfg)
    df = label_rows(inp.pair.target, inp.pair.tokenizer, inp.episodes, inp.traces, inp.checker, inp.budget, cfg,
                    inp.settled)
    df.to_csv(stage_path(cfg.run_dir, LABELS), index=False)
    save_config(cfg.run_dir, "label", cfg, {**{f"{c}_fraction": float(df[c].mean()) for c in
                                               ("harmful", "turns_wrong", "disfluent", "helpful", "changed")},
                                            "harmful": int(df["harmful"].sum()), "helpful": int(df["helpful"].sum()),
                                            "labelled": len(df), "settled_before": int(df["settled"].sum()),
                                            "target_outcome_rate": sum(e["outcome"] for e in inp.episodes)
                                            / len(inp.episodes)})
    print(report(df))
    return df
