"""Benchmark the edge's verification engines: verify throughput and latency for 1, 8 and 32 concurrent sessions,
our transformers engine against vLLM, on the same pair and machine.

Usage: ``python -m scripts.bench.engine [--pair smollm2] [--engines transformers vllm] [--sessions 1 8 32]
[--prefix-tokens 128] [--draft-len 8] [--rounds 10] [--out runs/bench_engine.json]`` (vLLM: run it with
.venv-vllm/bin/python, docs/engines.md).

For each N, N sessions are opened on each engine on different prompts of ``--prefix-tokens`` random tokens and
verified together round by round: one ``verify`` call over the N blocks (what the edge's batcher hands the engine
when N DRAFTs wait), then each session commits K/2 drafted tokens and one more (the same for every engine, so the
sequences stay equal).  A short warm-up goes first, discarded.  The engines take turns round by round, so a shared
machine's drift hits them alike.  Round 0 (the prompts' prefill) is reported apart.  Per N: the median and p90 latency
of a warm round, ms, and the throughput, verified blocks and scored positions (N x (K + 1)) per second.  Where both
engines ran, ``argmax_agree`` is the share of positions whose target argmax the two engines agree on (correctness).
On CPU this shows correctness and overhead; on a GPU it is the figure that counts.  A benchmark, not a test.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

import config
from testbed.common.machine import machine_info
from wisv.models.loader import builtin_paths, load_model, resolve_dtype
from wisv.pairs import resolve_pair
from wisv.serving.engine import EngineOptions, VerifyRequest
from wisv.serving.engines import ENGINE_CHOICES, build_engine
from wisv.serving.vllm_engine import VllmConfig


@dataclass
class EngineBenchConfig:
    """One benchmark (written into the JSON and beside it as <out stem>_config.toml)."""

    engines: list[str] = field(default_factory=lambda: list(ENGINE_CHOICES))  # engines compared, in this order
    sessions: list[int] = field(default_factory=lambda: [1, 8, 32])  # concurrent sessions N verified per call
    prefix_tokens: int = 128  # prompt length of every session, tokens
    draft_len: int = 8  # K: tokens verified per block
    rounds: int = 10  # timed warm rounds per N (after the prefill round)
    pair: str | None = "smollm2"  # named pair whose target is benchmarked (--target wins)
    target: str | None = None  # local HF target directory (None: the pair's, else the built-in toy target)
    device: str = "cpu"  # torch device of the transformers engine (vLLM runs on its own platform)
    dtype: str = "float32"  # the target's weights in both engines
    threads: int = 1  # torch intra-op threads of the transformers engine (vLLM's CPU backend binds its own)
    memory_budget_mb: float = 4096.0  # KV-cache budget of each engine, MB
    vllm: VllmConfig = field(default_factory=lambda: VllmConfig(block_size_tokens=32))  # the vLLM engine's options
    out: str = "runs/bench_engine.json"  # the benchmark's JSON (the committed one: results/bench_engine.json)

    def __post_init__(self) -> None:
        bad = [e for e in self.engines if e not in ENGINE_CHOICES]
        if bad or not self.engines:
            raise ValueError(f"--engines: choose among {ENGINE_CHOICES}, got {self.engines}")
        if not self.sessions or min(self.sessions) < 1:
            raise ValueError(f"--sessions needs counts >= 1, got {self.sessions}")


def random_ids(n: int, vocab: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n,), generator=g).tolist()


def run_rounds(engines: dict, n: int, cfg: EngineBenchConfig, vocab: int) -> dict[str, dict]:
    """N sessions per engine verified together for 1 + rounds rounds, the engines taking turns round by round (a
    shared machine's drift hits them alike): each engine's times (ms) and every block's argmax."""
    sids = [f"{n}-{i}" for i in range(n)]
    for engine in engines.values():
        for i, sid in enumerate(sids):
            engine.open(sid, random_ids(cfg.prefix_tokens, vocab, 1000 * n + i))
    times = {name: [] for name in engines}
    argmax = {name: [] for name in engines}
    for r in range(cfg.rounds + 1):
        reqs = [VerifyRequest(sid, random_ids(cfg.draft_len, vocab, 7 + 100 * r + i)) for i, sid in enumerate(sids)]
        for name, engine in engines.items():
            t0 = time.perf_counter()
            blocks = engine.verify(reqs)
            times[name].append((time.perf_counter() - t0) * 1e3)
            argmax[name].append(torch.stack([blocks[q.sid].argmax.cpu() for q in reqs]))  # [N, K+1]
            for q in reqs:
                engine.commit(q.sid, cfg.draft_len // 2, q.draft[-1])
    for engine in engines.values():
        for sid in sids:
            engine.close(sid)
    return {name: _row(n, t, cfg.draft_len) | {"_argmax": torch.stack(argmax[name])} for name, t in times.items()}


def _row(n: int, times: list[float], k: int) -> dict:
    """Round 0 (the prompts' prefill) apart; the median and p90 of the warm rounds, and the throughputs."""
    warm = sorted(times[1:])
    med = statistics.median(warm)
    return {"sessions": n, "prefill_ms": times[0], "median_ms": med,
            "p90_ms": warm[min(len(warm) - 1, int(0.9 * len(warm)))],
            "blocks_per_s": n / med * 1e3, "positions_per_s": n * (k + 1) / med * 1e3}


def engine_options(cfg: EngineBenchConfig) -> EngineOptions:
    """Each engine's options in this benchmark (the registry's builders take them)."""
    return EngineOptions(memory_budget_mb=cfg.memory_budget_mb, dtype=cfg.dtype, extra=cfg.vllm)


def parse_args(argv: list[str] | None = None) -> EngineBenchConfig:
    return config.parse(EngineBenchConfig, argv, prog="python -m scripts.bench.engine",
                        description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_args(argv)
    torch.set_num_threads(cfg.threads)
    path = cfg.target or (str(resolve_pair(cfg.pair).target) if cfg.pair else str(builtin_paths()[1]))
    target = load_model(Path(path), "target", cfg.device, resolve_dtype(cfg.dtype, cfg.device))
    vocab = int(target.config.vocab_size)
    engines, results, argmax = {}, {}, {}
    for name in cfg.engines:
        t0 = time.perf_counter()
        engines[name] = build_engine(name, target, engine_options(cfg))
        results[name] = {"start_s": time.perf_counter() - t0, "rows": []}
    run_rounds(engines, 1, replace(cfg, rounds=2), vocab)  # warm-up, discarded: first calls pay one-off costs
    for n in cfg.sessions:
        for name, row in run_rounds(engines, n, cfg, vocab).items():
            argmax[(name, n)] = row.pop("_argmax")
            results[name]["rows"].append(row)
            print(f"{name:12s} N={n:3d}: median {row['median_ms']:8.1f} ms  p90 {row['p90_ms']:8.1f} ms  "
                  f"{row['blocks_per_s']:7.1f} blocks/s  (prefill {row['prefill_ms']:.0f} ms)", flush=True)
    for name in cfg.engines:  # vLLM's CPU backend binds its own threads: what torch had after it started
        results[name] |= {"torch_threads": torch.get_num_threads(), "load_avg_1min": os.getloadavg()[0]}
    agree = {}
    if len(cfg.engines) == 2:
        a, b = cfg.engines
        agree = {str(n): float((argmax[(a, n)] == argmax[(b, n)]).float().mean()) for n in cfg.sessions}
        print(f"argmax agreement {a} vs {b}: {agree}")
    doc = {"config": config.to_dict(cfg), "machine": machine_info(), "target": path, "engines": results,
           "argmax_agree": agree}
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(doc, indent=1))
    config.write_config_beside(cfg.out, cfg, doc["machine"])
    return doc


if __name__ == "__main__":
    main()
