"""Verification time on this device: the K x batch x prefix grid through the batched engine, timed after warm-up
(CUDA events on a GPU, the wall clock on a CPU), each point the median of its repeats."""
from __future__ import annotations

import time
from collections.abc import Callable
from itertools import groupby

import numpy as np
import torch
from transformers import PreTrainedModel

from scripts.gpucheck.plan import Plan, grid_points
from wisv.serving.batchverify import BatchVerifier, EngineConfig, VerifyRequest, request_shape


def timer(device: str) -> Callable[[Callable[[], object]], float]:
    """A function timing one call, s: CUDA events on a GPU (after a sync), perf_counter on a CPU."""
    if not str(device).startswith("cuda"):
        def wall(fn: Callable[[], object]) -> float:
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        return wall

    def events(fn: Callable[[], object]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    return events


def warm_sessions(target: PreTrainedModel, batch: int, prefix: int, budget_mb: int,
                  rng: np.random.Generator) -> BatchVerifier:
    """An engine holding ``batch`` sessions, each with ``prefix`` + 1 cached positions (prefilled, untimed)."""
    vocab = int(target.config.vocab_size)
    eng = BatchVerifier(target, EngineConfig(memory_budget_mb=budget_mb))
    for i in range(batch):
        sid = f"s{i}"
        eng.open(sid, rng.integers(3, vocab, prefix).tolist())
        eng.verify([VerifyRequest(sid, [int(rng.integers(3, vocab))])])
        eng.commit(sid, 1, int(rng.integers(3, vocab)))
    return eng


def time_point(eng: BatchVerifier, k: int, plan: Plan, clock, rng: np.random.Generator) -> dict:
    """Median time of one batched verify of K random tokens per session; the caches are rolled back after each."""
    vocab = int(eng.model.config.vocab_size)
    reqs = [VerifyRequest(sid, rng.integers(3, vocab, k).tolist()) for sid in eng.sessions]
    before = {sid: st.cached_len for sid, st in eng.sessions.items()}
    shapes = [request_shape(eng.sessions[r.sid], k) for r in reqs]
    times = []
    for i in range(plan.warmup + plan.repeats):
        secs = clock(lambda: eng.verify(reqs))
        for sid, length in before.items():
            eng.rollback(sid, length)
        if i >= plan.warmup:
            times.append(secs)
    cached, new, block = (list(c) for c in zip(*shapes))
    return {"k": k, "batch": len(reqs), "prefix": cached[0], "seconds": float(np.median(times)),
            "times_s": [round(t, 7) for t in times], "cached": cached, "new": new, "block": block}


def time_grid(target: PreTrainedModel, plan: Plan, device: str, seed: int,
              points: list[tuple[int, int, int]] | None = None) -> list[dict]:
    """Every (batch, prefix, K) point (the plan's grid unless given): one prefill per (prefix, batch), then each K on
    it (K = 0: a decode step, one row a session)."""
    clock, rng, rows = timer(device), np.random.default_rng(seed), []
    for (prefix, batch), pts in groupby(points or grid_points(plan), key=lambda p: (p[1], p[0])):
        eng = warm_sessions(target, batch, prefix, plan.memory_budget_mb, rng)
        rows += [time_point(eng, k, plan, clock, rng) | {"prefix": prefix} for _, _, k in pts]
        del eng
        if str(device).startswith("cuda"):
            torch.cuda.empty_cache()
    return rows
