"""Benchmark the batched verification engine: warm-round verify time vs prefix length, with and without KV reuse.

Usage: ``python scripts/bench_verify.py [--prefixes 64 128 256 512] [--draft-len 8] [--rounds 30]
[--batch 4] [--out results/bench_verify.json] [--target DIR] [--device cpu]``

For each prefix length L a session is opened on L prompt tokens, warmed with one round, then timed over
``--rounds`` warm rounds (verify K tokens, commit half of them; the prefixes take turns round by round):
median ms per round.  The same with
``kv_reuse=False`` (SLED baseline: the prefix is recomputed each round).  ``--batch`` sessions verified
in one forward are compared with the same requests verified one by one.  Checks written to the JSON:
warm(512) <= 1.3 x warm(64) and no-reuse(512) >= 3 x warm(512).  A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from testbed.common.machine import machine_info  # noqa: E402
from wisv.batchverify import BatchVerifier, EngineConfig, VerifyRequest  # noqa: E402
from wisv.models import builtin_paths, default_dtype, load_model  # noqa: E402


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


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefixes", type=int, nargs="+", default=[64, 128, 256, 512])
    ap.add_argument("--draft-len", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--target", default=None, help="local HF target directory (default: built-in)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default="results/bench_verify.json")
    args = ap.parse_args(argv)
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
    doc = {"config": vars(args), "machine": machine_info(),
           "prefixes": rows, "checks": checks, "batch": batch}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(json.dumps(checks, indent=1))
    return doc


if __name__ == "__main__":
    main()
