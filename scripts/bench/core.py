"""Benchmark the in-process core: tokens/s of target-only greedy vs greedy SD at K = 4, 8, 16, with AAL.

Usage: ``python -m scripts.bench.core [--prompts 20] [--out runs/bench_core.json] [--threads 1]``
A benchmark, not a test: it writes JSON with the machine, versions and settings it ran under.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

import config
from testbed.common.machine import machine_info
from wisv.decoding.lossless import check_lossless
from wisv.decoding.speculative import spec_rows, speculative_generate
from wisv.models.loader import load_pair
from wisv.records.rows import to_frame
from wisv.records.summary import summarize_rounds
from wisv.tasks.evaluate import greedy_reference
from wisv.tasks.prompts import encode_prompt
from wisv.tasks.toydata import load_split


@dataclass
class CoreBenchConfig:
    """One benchmark (saved beside the JSON as <out stem>_config.toml)."""

    prompts: int = 20  # first N problems of the built-in test split
    max_new_tokens: int = 160  # generation budget per prompt, tokens
    draft_lens: list[int] = field(default_factory=lambda: [4, 8, 16])  # draft lengths K of greedy SD, tokens
    threads: int = 1  # torch intra-op threads
    drafter: str | None = None  # local HF drafter directory (None: built-in)
    target: str | None = None  # local HF target directory (None: built-in)
    out: str = "runs/bench_core.json"  # the benchmark's JSON (the committed one: results/bench_core.json)


def bench_target_only(target, prompts: list[list[int]], max_new: int) -> tuple[dict, list[list[int]]]:
    t0, outs = time.perf_counter(), []
    for ids in tqdm(prompts, desc="target-only greedy"):
        outs.append(greedy_reference(target, ids, max_new))
    dt = time.perf_counter() - t0
    n = sum(map(len, outs))
    return {"tokens": n, "seconds": dt, "tokens_per_s": n / dt}, outs


def bench_sd(drafter, target, prompts: list[list[int]], refs: list[list[int]], k: int, max_new: int) -> dict:
    t0, records, lens, identical, ok = time.perf_counter(), [], [], 0, 0
    for i, (ids, ref) in enumerate(tqdm(list(zip(prompts, refs)), desc=f"greedy SD K={k}")):
        out = speculative_generate(drafter, target, ids, max_new_tokens=max_new, draft_len=k)
        records, lens = records + spec_rows(out, str(i), len(ids)), lens + [len(out.tokens)]
        rep = check_lossless(target, ids, ref, out.tokens)
        identical, ok = identical + rep.identical, ok + rep.ok
    dt = time.perf_counter() - t0
    n, s = sum(lens), summarize_rounds(to_frame(records), pd.DataFrame({"n_tokens": lens}))
    return {"k": k, "tokens": n, "seconds": dt, "tokens_per_s": n / dt, "aal": s["aal"],
            "rounds_per_prompt": s["rounds_per_prompt"], "identical_to_target": identical / len(prompts),
            "lossless_up_to_near_ties": ok / len(prompts)}


def parse_args(argv: list[str] | None = None) -> CoreBenchConfig:
    return config.parse(CoreBenchConfig, argv, prog="python -m scripts.bench.core", description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    drafter, target, tok = load_pair(args.drafter, args.target)
    prompts = [encode_prompt(tok, p.prompt) for p in load_split("test", args.prompts)]
    base, refs = bench_target_only(target, prompts, args.max_new_tokens)
    sd = [bench_sd(drafter, target, prompts, refs, k, args.max_new_tokens) for k in args.draft_lens]
    for r in sd:
        r["speedup"] = r["tokens_per_s"] / base["tokens_per_s"]
    res = {"target_only": base, "greedy_sd": sd, "prompts": args.prompts, "max_new_tokens": args.max_new_tokens,
           "threads": args.threads, "drafter": args.drafter or "built-in", "target": args.target or "built-in",
           "machine": machine_info()}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    config.write_config_beside(out, args, res["machine"])
    print(f"target-only: {base['tokens_per_s']:.1f} tok/s")
    for r in sd:
        print(f"greedy SD K={r['k']:>2}: {r['tokens_per_s']:.1f} tok/s ({r['speedup']:.2f}x), AAL {r['aal']:.2f}, "
              f"identical {r['identical_to_target']:.0%}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
