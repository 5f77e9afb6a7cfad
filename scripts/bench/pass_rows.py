"""Benchmark what one pass of n rows costs each model of a pair, for n = 1.. (the shape of a verification pass).

Usage: ``python -m scripts.bench.pass_rows [--pair smollm2] [--max-rows 12] [--prefix 100] [--repeats 9]
[--threads 1] [--out runs/smollm2/pass_rows.json]``.

Each model feeds n new rows after a cache of ``--prefix`` positions through the loop's own forward
(wisv.decoding.sessions.cached_forward): the target reads every row's logits, as a verification does, the drafter
the last row's, as a drafting step does.  The counts take turns within each repeat, so a drift of the machine's speed
hits them alike; the median is kept.  From the target's costs the JSON gives the plan that pads a verification pass
to the cheapest count of rows at least its own, where that saves ``--margin`` or more (``target_pad_plan``;
wisv.decoding.passrows): ``speculative_generate(pad_to=...)`` and the drafter bench's ``--pass-rows`` read it.  A
benchmark, not a test.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import DynamicCache

import config
from scripts.bench.verify import prefix_ids
from testbed.common.machine import machine_info
from wisv.decoding.kvcache import crop_to
from wisv.decoding.passrows import pad_plan
from wisv.decoding.sessions import cached_forward
from wisv.models.loader import DTYPE_CHOICES, load_pair, resolve_dtype
from wisv.pairs import resolve_pair


@dataclass
class PassRowsBenchConfig:
    """One benchmark (written into the JSON)."""

    pair: str = "smollm2"  # the named pair (python -m wisv.pairs build NAME; builtin: the toy pair)
    drafter_dtype: str = field(default="float32", metadata={"choices": DTYPE_CHOICES})  # the drafter's weights (auto:
    #   fp32 on CPU); the target stays float32
    max_rows: int = field(default=12, metadata={"min": 1})  # time passes of 1 .. this many rows
    prefix: int = field(default=100, metadata={"min": 1})  # cached positions before each pass, tokens
    repeats: int = field(default=9, metadata={"min": 1})  # interleaved repeats per count (median taken)
    margin: float = field(default=0.05, metadata={"min": 0.0, "max": 0.99})  # pad a pass only where the larger one
    #   costs at least this fraction less (the medians' noise stays out of the plan)
    threads: int = field(default=1, metadata={"min": 1})  # torch intra-op threads
    out: str = "runs/smollm2/pass_rows.json"  # the benchmark's JSON (committed: results/smollm2/pass_rows.json)


def pass_ms(model, max_rows: int, prefix: int, repeats: int, keep_all: bool) -> dict[int, float]:
    """Median ms of one pass of n rows after ``prefix`` cached positions, n = 1 .. ``max_rows``; ``keep_all``: the LM
    head on every row (a verification), else on the last (a drafting step).  The cache is cropped back after each."""
    vocab = int(model.config.vocab_size)
    ids = prefix_ids(prefix + max_rows, vocab, seed=0)
    cache = DynamicCache()
    cached_forward(model, cache, 0, ids[:prefix], keep=1)
    times: dict[int, list[float]] = {n: [] for n in range(1, max_rows + 1)}
    for r in range(repeats + 1):
        for n in times:
            t0 = time.perf_counter()
            cached_forward(model, cache, prefix, ids[prefix:prefix + n], keep=n if keep_all else 1)
            dt = (time.perf_counter() - t0) * 1e3
            crop_to(cache, prefix)
            if r:  # repeat 0 warms the kernels up
                times[n].append(dt)
    return {n: round(statistics.median(t), 3) for n, t in times.items()}


def parse_args(argv: list[str] | None = None) -> PassRowsBenchConfig:
    return config.parse(PassRowsBenchConfig, argv, prog="python -m scripts.bench.pass_rows",
                        description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_args(argv)
    torch.set_num_threads(cfg.threads)
    load_start = os.getloadavg()[0]
    paths = resolve_pair(cfg.pair)
    pair = load_pair(paths.drafter, paths.target)
    pair.drafter.to(resolve_dtype(cfg.drafter_dtype, "cpu"))
    with torch.inference_mode():
        target = pass_ms(pair.target, cfg.max_rows, cfg.prefix, cfg.repeats, keep_all=True)
        drafter = pass_ms(pair.drafter, cfg.max_rows, cfg.prefix, cfg.repeats, keep_all=False)
    for n in target:
        print(f"{n:3d} rows: target {target[n]:8.2f} ms ({target[n] / target[1]:.2f}x one row)   "
              f"drafter {drafter[n]:7.2f} ms", flush=True)
    doc = {"config": asdict(cfg), "target_ms_by_rows": target, "drafter_ms_by_rows": drafter,
           "target_pad_plan": pad_plan(target, cfg.margin),
           "drafter_dtype": str(pair.drafter.dtype).removeprefix("torch."),
           "machine": machine_info(), "load_avg_1min": {"start": load_start, "end": os.getloadavg()[0]}}
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"target_pad_plan (rows -> rows fed): {doc['target_pad_plan'] or 'none'}")
    return doc


if __name__ == "__main__":  # bad input (a value, an unbuilt pair, an unwritable path) is one line, exit 2
    sys.exit(config.run_reporting("python -m scripts.bench.pass_rows", main, (ValueError, OSError)))
