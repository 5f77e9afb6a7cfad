"""Benchmark the batched verification engine: warm-round verify time vs prefix length, with and without KV reuse.

Usage: ``python -m scripts.bench.verify [--prefixes 64 128 256 512] [--draft-len 8] [--rounds 30]
[--batch 4] [--out runs/bench_verify.json] [--target DIR] [--device cpu]``

For each prefix length L a session is opened on L prompt tokens, warmed with one round, then timed over
``--rounds`` warm rounds (verify K tokens, commit half of them; the prefixes take turns round by round):
median ms per round.  The same with
``kv_reuse=False`` (SLED baseline: the prefix is recomputed each round).  ``--batch`` sessions verified
in one forward are compared with the same requests verified one by one.  Checks written to the JSON:
warm(512) <= 1.3 x warm(64) and no-reuse(512) >= 3 x warm(512).  A benchmark, not a test.
"""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

import config
from testbed.common.machine import machine_info
from wisv.models.loader import builtin_paths, default_dtype, load_model
from wisv.serving.batchverify import BatchVerifier, EngineConfig
from wisv.serving.engine import VerifyRequest


@dataclass
class VerifyBenchConfig:
    """One benchmark (written into the JSON and beside it as <out stem>_config.toml)."""

    prefixes: list[int] = field(default_factory=lambda: [64, 128, 256, 512])  # prefix lengths L timed, tokens
    draft_len: int = 8  # K: tokens verified per round
    rounds: int = 30  # timed warm rounds per prefix (no-KV-reuse runs max(5, rounds // 3))
    batch: int = 4  # sessions verified in one forward vs one by one, at prefix ~128
    threads: int = 1  # torch intra-op threads
    target: str | None = None  # local HF target directory (None: built-in)
    device: str = "cpu"  # torch device
    out: str = "runs/bench_verify.json"  # the benchmark's JSON (the committed one: results/bench_verify.json)

    def __post_init__(self) -> None:
        if not self.prefixes:
            raise ValueError("--prefixes needs at least one prefix length")


def prefix_ids(n: int, vocab: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n,), generator=g).tolist()


def warm_round_ms(target, prefixes: list[int], k: int, rounds: int, kv_reuse: bool, seed: int = 0) -> dict[int, float]:
    """Median wall time of one warm verify + commit at each prefix ~L (ms).  The prefixes take turns round by
    round, so a drift of the machine's speed during the benchmark hits them all alike."""
    vocab = int(target.config.vocab_size)
    engines = {L: BatchVerifier(target, EngineConfig(kv_reuse=kv_reuse)) for L in prefixes}
    for L, eng in engines.items():
        eng.open("s", prefix_ids(L, vocab, seed))
    draft = prefix_ids(k, vocab, seed + 1)
    times = {L: [] for L in prefixes}
    for r in range(rounds + 1):
        for L, eng in engines.items():
            t0 = time.perf_counter()
            eng.verify([VerifyRequest("s", draft)])
            eng.commit("s", k // 2, draft[0])
            if r:  # round 0 is the cold prefill
                times[L].append((time.perf_counter() - t0) * 1e3)
            _reset(eng, "s", L)
    return {L: statistics.median(t) for L, t in times.items()}


def _reset(eng: BatchVerifier, sid: str, L: int) -> None:
    """Roll a session back to its first L tokens, so every timed round runs at prefix L."""
    eng.sessions[sid].seq = eng.sessions[sid].seq[:L]
    eng.rollback(sid, L - 1)


def batch_vs_serial_ms(target, L: int, k: int, b: int, rounds: int) -> dict:
    """Median ms of b warm requests in one forward vs the same b one after another."""
    vocab = int(target.config.vocab_size)
    res = {}
    for mode in ("batched", "serial"):
        eng = BatchVerifier(target)
        for i in range(b):
            eng.open(f"s{i}", prefix_ids(L + 7 * i, vocab, i))
        times = []
        for r in range(rounds + 1):
            reqs = [VerifyRequest(f"s{i}", prefix_ids(k, vocab, 100 + r + i)) for i in range(b)]
            t0 = time.perf_counter()
            if mode == "batched":
                eng.verify(reqs)
            else:
                for q in reqs:
                    eng.verify([q])
            dt = (time.perf_counter() - t0) * 1e3
            for q in reqs:
                eng.commit(q.sid, k // 2, q.draft[0])
            if r:
                times.append(dt)
        res[f"{mode}_ms"] = statistics.median(times)
    res["speedup"] = res["serial_ms"] / res["batched_ms"]
    return res


def parse_args(argv: list[str] | None = None) -> VerifyBenchConfig:
    return config.parse(VerifyBenchConfig, argv, prog="python -m scripts.bench.verify",
                        description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    target = load_model(Path(args.target or builtin_paths()[1]), "target", args.device, default_dtype(args.device))
    rows = []
    warm_ms = warm_round_ms(target, args.prefixes, args.draft_len, args.rounds, True)
    cold_ms = warm_round_ms(target, args.prefixes, args.draft_len, max(5, args.rounds // 3), False)
    for L in args.prefixes:
        warm, cold = warm_ms[L], cold_ms[L]
        rows.append({"prefix": L, "warm_ms": warm, "no_kv_reuse_ms": cold, "reuse_speedup": cold / warm})
        print(f"prefix {L:4d}: warm {warm:7.2f} ms   no-kv-reuse {cold:7.2f} ms   ({cold / warm:.1f}x)", flush=True)
    by = {r["prefix"]: r for r in rows}
    lo, hi = min(by), max(by)
    checks = {"warm_hi_over_lo": by[hi]["warm_ms"] / by[lo]["warm_ms"], "warm_hi_over_lo_target": 1.3,
              "no_reuse_over_warm_at_hi": by[hi]["reuse_speedup"], "no_reuse_over_warm_target": 3.0}
    checks["pass"] = checks["warm_hi_over_lo"] <= 1.3 and checks["no_reuse_over_warm_at_hi"] >= 3.0
    batch = batch_vs_serial_ms(target, 128, args.draft_len, args.batch, args.rounds)
    print(f"batch of {args.batch} at prefix ~128: one forward {batch['batched_ms']:.2f} ms vs one by one "
          f"{batch['serial_ms']:.2f} ms ({batch['speedup']:.2f}x)")
    doc = {"config": asdict(args), "machine": machine_info(),
           "prefixes": rows, "checks": checks, "batch": batch}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1))
    config.write_config_beside(args.out, args, doc["machine"])
    print(json.dumps(checks, indent=1))
    return doc


if __name__ == "__main__":
    main()
