"""Benchmark prompt lookup (model-free drafting, wisv/decoding/ngram.py) in process against the target alone.

Usage: ``python -m scripts.bench.ngram [--pair smollm2] [--prompts-file F | --dataset spec-bench:summarization,rag]
[--prompts 5] [--max-new-tokens 128] [--pass-rows results/smollm2/pass_rows.json ...] [--out runs/bench_ngram.json]``.

Methods, interleaved prompt by prompt on one thread: the target alone by ``generate`` and through our forward
(``target_greedy``), ``transformers``' prompt lookup (``prompt_lookup_num_tokens`` at each of ``--peer-tokens``),
and ours: vLLM's proposal verified in one pass, whole (``ngram``) and cut by the pass-cost window to the length with
the most expected tokens per millisecond (``ngram-window``; the target's pass cost by rows from ``--pass-rows``,
whose pad plan both of ours use).  Each output is checked against the target's greedy output.  Writes per-prompt
seconds, Spec-Bench's speed-up (mean per-question tokens/s over the baseline's), paired time changes with their
intervals, the mean accepted tokens (bonus counted) and the machine's load.  A benchmark, not a test.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

import config
from testbed.common.machine import machine_info
from wisv.decoding.ngram import NgramConfig, NgramDraftSession, costs_at
from wisv.decoding.passrows import load_plan
from wisv.decoding.speculative import speculative_generate, target_greedy
from wisv.models.loader import load_model, load_tokenizer
from wisv.pairs import resolve_pair
from wisv.records.paired import paired_time_change
from wisv.tasks.evaluate import eos_id
from wisv.tasks.prompts import prompt_rows


@dataclass
class NgramBenchConfig:
    """One benchmark (written into the JSON)."""

    pair: str = "smollm2"  # the named pair whose target verifies (python -m wisv.pairs build NAME)
    prompts_file: str | None = None  # a JSONL of prompts (wisv.tasks.prompts); one of this and --dataset
    dataset: str | None = None  # a dataset by name (wisv.tasks.datasets), e.g. spec-bench:summarization,rag
    prompts: int = field(default=5, metadata={"min": 1})  # prompts per category (per file without categories)
    max_new_tokens: int = field(default=128, metadata={"min": 1})  # tokens generated per prompt
    prompt_lookup_min: int = field(default=2, metadata={"min": 1})  # shortest n-gram matched (vLLM's name)
    prompt_lookup_max: int = field(default=4, metadata={"min": 1})  # longest n-gram matched (vLLM's name)
    num_speculative_tokens: int = field(default=10, metadata={"min": 1})  # most tokens a proposal carries
    peer_tokens: list[int] = field(default_factory=lambda: [10, 3])  # transformers' prompt_lookup_num_tokens values
    pass_rows: list[str] = field(default_factory=lambda: [
        "results/smollm2/pass_rows.json"])  # the target's pass cost by rows, each file measured after its own prefix
    #   (python -m scripts.bench.pass_rows --prefix N; the window reads the one measured nearest below the context),
    #   and the first file's pad plan; none: no window, no padding
    threads: int = field(default=1, metadata={"min": 1})  # torch threads
    out: str = "runs/bench_ngram.json"  # the JSON written


def parse_args(argv: list[str] | None = None) -> NgramBenchConfig:
    cfg = config.parse(NgramBenchConfig, argv, description=__doc__.splitlines()[0])
    if (cfg.prompts_file is None) == (cfg.dataset is None):
        raise ValueError("give one of --prompts-file and --dataset")
    return cfg


def timed(fn, *args) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


@torch.inference_mode()
def hf_generate(target, ids: list[int], max_new: int, eos: int, lookup: int | None = None) -> list[int]:
    """The target's greedy ``generate`` (with ``prompt_lookup_num_tokens=lookup`` when given): new tokens, cut after
    EOS."""
    x = torch.tensor([ids])
    kw = {"prompt_lookup_num_tokens": lookup} if lookup else {}
    out = target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new, do_sample=False,
                          eos_token_id=eos, pad_token_id=target.generation_config.pad_token_id, **kw)
    new = out[0, len(ids):].tolist()
    return new[:new.index(eos) + 1] if eos in new else new


def methods(target, cfg: NgramBenchConfig, eos: int, costs: dict | None, plan: dict | None) -> dict:
    """Name -> (prompt ids -> (new tokens, rounds or None)), in the order they run on each prompt."""
    ng = NgramConfig(cfg.prompt_lookup_min, cfg.prompt_lookup_max, cfg.num_speculative_tokens)
    n = cfg.max_new_tokens

    def ours(window: bool):
        def run(ids):
            out = speculative_generate(None, target, ids, max_new_tokens=n, draft_len=ng.num_speculative_tokens,
                                       make_draft=lambda s: NgramDraftSession(s, ng, costs if window else None),
                                       record_edge=False, pad_to=plan, eos_token_id=eos)
            return out.tokens, out.rounds
        return run
    out = {"target-generate": lambda ids: (hf_generate(target, ids, n, eos), None),
           "target-ours": lambda ids: _alone(target_greedy(target, ids, max_new_tokens=n, eos_token_id=eos))}
    out |= {f"hf-lookup-{k}": (lambda ids, k=k: (hf_generate(target, ids, n, eos, k), None)) for k in cfg.peer_tokens}
    out |= {"ngram": ours(False), "ngram-window": ours(True)}
    return out


class _Pass:
    """One pass of the target alone, as a round record reads (nothing drafted, the one token committed)."""

    drafted, accepted = 0, 0


def _alone(tokens: list[int]) -> tuple[list[int], list[_Pass]]:
    """The target alone's tokens and its passes: one a token."""
    return tokens, [_Pass() for _ in tokens]


def run_prompts(target, rows: list[dict], cfg: NgramBenchConfig, costs: dict | None, plan: dict | None) -> list[dict]:
    """Every method on every prompt, interleaved; one record per (prompt, method)."""
    eos, recs = eos_id(target), []
    ms = methods(target, cfg, eos, costs, plan)
    for i, r in enumerate(rows):
        ids = list(r["prompt_ids"])
        ref = None
        for name, fn in ms.items():
            (toks, rounds), secs = timed(fn, ids)
            ref = toks if ref is None else ref
            rec = {"prompt_id": r["prompt_id"], "category": r.get("category", r.get("kind", "all")), "method": name,
                   "seconds": secs, "tokens": len(toks), "matches_target": toks == ref, "prompt_tokens": len(ids)}
            if rounds is not None:
                rec |= {"rounds": len(rounds), "drafted": sum(x.drafted for x in rounds),
                        "accepted": sum(x.accepted for x in rounds),
                        "accepted_at": [x.accepted for x in rounds], "drafted_at": [x.drafted for x in rounds]}
            recs.append(rec)
        print(f"[bench] {i + 1}/{len(rows)} {r['prompt_id']}: "
              + ", ".join(f"{x['method']} {x['seconds']:.2f}s" for x in recs[-len(ms):]), flush=True)
    return recs


def modelled_ms(drafted_at: list[int], costs: dict[int, float], plan: dict[int, int] | None) -> float:
    """The decode passes' cost by the measured pass costs (``costs``: ms by rows; the plan's padding applied): one
    pass of ``drafted + 1`` rows a round; the target alone is a round of 0 drafted tokens per token.  Independent of
    the machine's load while the bench ran (prefill left out, as both methods pay it once)."""
    rows = [(plan or {}).get(d + 1, d + 1) for d in drafted_at]
    top = max(costs)
    return float(sum(costs.get(r, costs[top] * r / top) for r in rows))


def add_modelled(recs: list[dict], tables: dict[int, dict[int, float]] | None, plan: dict[int, int] | None) -> None:
    """The ``modelled_ms`` of each record whose passes are known (``drafted_at``: ours, and the target alone through
    our forward, one pass of one row a token), priced by the table measured nearest below its prompt's length; the
    first pass carries the prompt in both, priced as a decode pass."""
    if not tables:
        return
    for r in recs:
        if "drafted_at" in r:
            r["modelled_ms"] = modelled_ms(r["drafted_at"], costs_at(tables, r.get("prompt_tokens", 0)), plan)


def summary(recs: list[dict], baselines: tuple[str, ...] = ("target-generate", "target-ours")) -> dict:
    """Per category (and overall) and method: Spec-Bench's speed-up over each baseline (mean per-question tokens/s
    over the baseline's), the paired time change with its interval, the mean accepted tokens with the bonus
    counted, and whether every output equalled the target's."""
    out = {}
    cats = sorted({r["category"] for r in recs}) + ["overall"]
    for cat in cats:
        sub = [r for r in recs if cat == "overall" or r["category"] == cat]
        by = {}
        for r in sub:
            by.setdefault(r["method"], []).append(r)
        out[cat] = {m: _method_row(rs, by, baselines) for m, rs in by.items()}
    return out


def _method_row(rs: list[dict], by: dict, baselines: tuple[str, ...]) -> dict:
    secs = np.array([r["seconds"] for r in rs])
    row = {"prompts": len(rs), "seconds": float(secs.sum()), "tokens_per_s": float(np.mean(
        [r["tokens"] / r["seconds"] for r in rs])), "matches_target": all(r["matches_target"] for r in rs)}
    for b in baselines:
        base = by[b]
        row[f"speedup_vs_{b}"] = row["tokens_per_s"] / float(np.mean([r["tokens"] / r["seconds"] for r in base]))
        row[f"time_change_vs_{b}"] = paired_time_change(np.array([r["seconds"] for r in base]), secs)
    if "modelled_ms" in rs[0]:
        base = by["target-ours"]
        row["modelled_speedup_vs_target-ours"] = sum(r["modelled_ms"] for r in base) / sum(
            r["modelled_ms"] for r in rs)
    if "rounds" in rs[0] and any(r["drafted"] for r in rs):
        rounds = sum(r["rounds"] for r in rs)
        row |= {"rounds": rounds, "drafted": sum(r["drafted"] for r in rs),
                "mean_acceptance_length": (sum(r["accepted"] for r in rs) + rounds) / rounds}
    return row


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_args(argv)
    NgramConfig(cfg.prompt_lookup_min, cfg.prompt_lookup_max, cfg.num_speculative_tokens)  # bad values fail first
    torch.set_num_threads(cfg.threads)
    load_start = os.getloadavg()[0]
    costs, plan = read_costs(cfg.pass_rows), (load_plan(cfg.pass_rows[0]) if cfg.pass_rows else None)
    paths = resolve_pair(cfg.pair)
    tok = load_tokenizer(paths.target, "tokenizer")
    target = load_model(paths.target, "target", "cpu", torch.float32)
    rows = _per_category(prompt_rows(tok, "test", None, cfg.prompts_file, dataset=cfg.dataset,
                                     first_turn_only=True), cfg.prompts)
    recs = run_prompts(target, rows, cfg, costs, plan)
    add_modelled(recs, costs, plan)
    result = {"config": asdict(cfg), "pass_costs_ms_by_prefix": costs, "pad_plan": plan, "records": recs,
              "summary": summary(recs), "machine": machine_info(),
              "load_avg_1min": {"start": load_start, "end": os.getloadavg()[0]}}
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({c: {m: {k: v for k, v in row.items() if not k.startswith("time_change")}
                          for m, row in s.items()} for c, s in result["summary"].items()}, indent=1))
    return result


def read_costs(paths: list[str]) -> dict[int, dict[int, float]] | None:
    """Prefix -> the target's ms by rows, from pass-rows benchmarks (each records its ``config.prefix``)."""
    out = {}
    for p in paths:
        doc = json.loads(Path(p).read_text())
        out[int(doc["config"]["prefix"])] = {int(k): float(v) for k, v in doc["target_ms_by_rows"].items()}
    return out or None


def _per_category(rows: list[dict], n: int) -> list[dict]:
    """The first ``n`` rows of each category (``category``, else ``kind``, else one group)."""
    seen: dict[str, int] = {}
    out = []
    for r in rows:
        c = r.get("category", r.get("kind", "all"))
        if seen.get(c, 0) < n:
            seen[c] = seen.get(c, 0) + 1
            out.append(r)
    return out


if __name__ == "__main__":  # bad input (a value, a missing path, an unbuilt pair) is one line, exit 2
    sys.exit(config.run_reporting("python -m scripts.bench.ngram", main, (ValueError, OSError, KeyError)))
