"""Benchmark the sibling branch's verify-time cost per round: the chain's verification pass alone against the chain's
pass plus the sibling pass (the target's own token beside each mismatching draft token, wisv/decoding/siblings.py).

Usage: ``python -m scripts.bench.sibling [--pairs toy smollm2] [--prompts 10] [--draft-len 8]``.
Per pair (a pair that is not built is skipped, with the reason in the JSON), greedy SD runs on the first ``--prompts``
prompts of the pair's calib pool with two verify sessions of the target that follow the same greedy path: ``plain``
(``verify``) and ``sibling`` (``verify`` then ``verify_siblings`` at the round's mismatches).  Each round times both,
interleaved (their order alternates by round), on one torch thread; the drafter's time is not counted.  Per pair:
rounds, rounds with a mismatch, mismatches per such round, and the verify time per round (mean and median, ms) of
each variant over all rounds and over the mismatch rounds (a round without a mismatch runs no sibling pass).  Compute
is measured on this machine while others may share it.  Writes ``bench_sibling.json`` to ``--out``.  A benchmark,
not a test.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

import config
from testbed.common.machine import machine_info
from wisv.decoding.acceptance import greedy_accept_ids, mismatch_positions
from wisv.decoding.sessions import DraftSession, VerifySession
from wisv.models.loader import load_pair
from wisv.pairs import PairNotBuilt, default_prompts_file, resolve_pair
from wisv.tasks.evaluate import eos_id
from wisv.tasks.prompts import prompt_rows


@dataclass
class BenchConfig:
    """bench_sibling settings."""

    pairs: list[str] = field(default_factory=lambda: ["toy", "smollm2"])  # named pairs (an unbuilt one is skipped)
    prompts: int = 10  # calib prompts per pair: the first N of the pair's calib pool
    draft_len: int = 8  # K, draft tokens per round
    max_new_tokens: int = 64  # generation budget per prompt, tokens
    out: str = "runs/sibling"  # output directory (the committed one: results/sibling)


def round_times(t_plain: VerifySession, t_sib: VerifySession, draft: list[int], sibling_first: bool
                ) -> tuple[float, float, int, list[int]]:
    """One round on both sessions: (plain verify s, verify + siblings s, mismatches, the committed tokens)."""
    def plain() -> tuple[float, torch.Tensor]:
        t0 = time.perf_counter()
        blk = t_plain.verify(draft)
        return time.perf_counter() - t0, blk.argmax

    def with_siblings() -> tuple[float, list[int]]:
        t0 = time.perf_counter()
        blk = t_sib.verify(draft)
        mism = mismatch_positions(torch.tensor(draft), blk.argmax.cpu())
        if mism:
            t_sib.verify_siblings(draft, mism, blk.argmax[mism].tolist())
        return time.perf_counter() - t0, mism

    if sibling_first:
        (s_sib, mism), (s_plain, argmax) = with_siblings(), plain()
    else:
        (s_plain, argmax), (s_sib, mism) = plain(), with_siblings()
    v = greedy_accept_ids(torch.tensor(draft), argmax.cpu())
    committed = t_plain.commit(draft, v.n_accepted, v.next_token)
    if t_sib.commit(draft, v.n_accepted, v.next_token) != committed:
        raise RuntimeError("the sibling session committed other tokens")
    return s_plain, s_sib, len(mism), committed


def bench_pair(name: str, cfg: BenchConfig) -> dict:
    """The per-round verify times of one pair."""
    paths = resolve_pair(name)
    pair = load_pair(paths.drafter, paths.target)
    eos = eos_id(pair.target)
    rows = prompt_rows(pair.tokenizer, "calib", cfg.prompts, default_prompts_file(name, "calib"))
    rounds = []
    for row in rows:
        ids = list(row["prompt_ids"])
        d, t_plain, t_sib = DraftSession(pair.drafter, ids), VerifySession(pair.target, ids), \
            VerifySession(pair.target, ids)
        n = 0
        while n < cfg.max_new_tokens:
            draft = d.draft(min(cfg.draft_len, cfg.max_new_tokens - n), eos_token_id=eos).tokens
            s_plain, s_sib, m, committed = round_times(t_plain, t_sib, draft, len(rounds) % 2 == 1)
            d.commit(committed)
            rounds.append({"plain_s": s_plain, "sibling_s": s_sib, "mismatches": m})
            n += len(committed)
            if eos in committed:
                break
    return {"pair": name, "target": str(paths.target), **summary(rounds)}


def summary(rounds: list[dict]) -> dict:
    """Verify time per round, ms, of both variants over all rounds and over the rounds with a mismatch."""
    def stats(rs: list[dict]) -> dict:
        if not rs:
            return {}
        out = {}
        for key in ("plain_s", "sibling_s"):
            xs = [r[key] * 1e3 for r in rs]
            out[key.replace("_s", "_ms")] = {"mean": statistics.fmean(xs), "median": statistics.median(xs)}
        out["overhead_ms_mean"] = out["sibling_ms"]["mean"] - out["plain_ms"]["mean"]
        out["overhead_frac_mean"] = out["overhead_ms_mean"] / out["plain_ms"]["mean"]
        return out
    mism = [r for r in rounds if r["mismatches"]]
    return {"rounds": len(rounds), "mismatch_rounds": len(mism),
            "mismatches_per_mismatch_round": statistics.fmean(r["mismatches"] for r in mism) if mism else 0.0,
            "all_rounds": stats(rounds), "mismatch_rounds_only": stats(mism)}


def run(cfg: BenchConfig) -> dict:
    torch.set_num_threads(1)
    results, skipped = [], {}
    for name in cfg.pairs:
        try:
            results.append(bench_pair(name, cfg))
        except PairNotBuilt as e:
            skipped[name] = str(e)
            continue
        r = results[-1]
        a = r["all_rounds"]
        print(f"{name}: {r['rounds']} rounds ({r['mismatch_rounds']} with a mismatch): verify "
              f"{a['plain_ms']['mean']:.2f} ms plain, {a['sibling_ms']['mean']:.2f} ms with siblings per round "
              f"(+{a['overhead_frac_mean']:.1%})")
    report = {"config": asdict(cfg), "machine": machine_info(), "torch_threads": torch.get_num_threads(),
              "results": results, "skipped": skipped}
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_sibling.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out / 'bench_sibling.json'}")
    return report


def main(argv: list[str] | None = None) -> None:
    cfg = config.parse(BenchConfig, argv, description=__doc__.splitlines()[0])
    if config.run_reporting("python -m scripts.bench.sibling", lambda: run(cfg)):
        sys.exit(2)


if __name__ == "__main__":
    main()
