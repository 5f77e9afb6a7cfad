"""Benchmark tree drafting against chain drafting at the same draft-token budget: AAL and end-to-end latency.

Usage: ``python -m scripts.bench.tree [--budgets 8 16 32] [--rtts-ms 5 20 50] [--prompts 20] [--proactive 4]``.
On the built-in pair (or ``--drafter DIR --target DIR``), each test prompt is decoded in process by
chain greedy SD (K = budget), tree SD (a best-first tree of ``budget`` tokens, wisv/decoding/tree.py) and tree SD with
proactive expansion of the best leaf (``--proactive`` tokens).  With ``--calib-prompts`` > 0 two calibrated
rankings are fitted on calib-split prompts (wisv/decoding/treecal.py: ``cal`` by drafter rank and probability,
``tokcal`` per proposed token too), and each runs as a tree (``tree+cal``) and, for a fair baseline, as a chain of the
best-scored tokens at the same budget (``chain+cal``).  Per method and budget: accepted draft tokens per
verification (``aal``, as wisv.records.summary), tokens committed per verification (``tokens_per_verification``, the
bonus included), drafter calls, and whether every output equals target-only greedy.

Latency per prompt is modelled from the measured compute of each round and the link (SPEC round time, stages
sequential): ``t_draft + 8 (up + down) / rate + RTT + t_verify``, with the bytes of the round's DRAFT and VERDICT in
our wire format; proactive expansion overlaps the link and the verification, so that variant's round costs
``t_draft + max(link + t_verify, t_proactive)``.  Compute is measured on this machine while others may share it.
Writes ``bench_tree.json`` to ``--out``; the goal checked is tree >= 1.2x chain tokens per verification at
budget 16, for each tree method over the drafter's chain and over the chain with the same scores.  A benchmark,
not a test.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
import torch

import config
from protocols.registry import get_protocol
from protocols.wire import MsgType, encode, frame_bytes, make
from testbed.common.machine import machine_info
from wisv.decoding.acceptance import greedy_accept_ids
from wisv.decoding.sessions import Draft, DraftSession, VerifySession
from wisv.decoding.speculative import truncate_output
from wisv.decoding.treecal import Calibration, collect, fit
from wisv.decoding.treedraft import Score
from wisv.decoding.treespec import tree_generate
from wisv.models.loader import load_pair
from wisv.pairs import apply_pair, default_prompts_file
from wisv.records.summary import summarize_rounds
from wisv.tasks.evaluate import eos_id, greedy_reference
from wisv.tasks.prompts import prompt_rows

GOAL_BUDGET, GOAL_RATIO = 16, 1.2  # the goal: tree >= 1.2x chain tokens per verification at budget 16


@dataclass
class BenchConfig:
    """bench_tree settings."""

    budgets: list[int] = field(default_factory=lambda: [8, 16, 32])  # draft tokens per round (chain K, tree N)
    rtts_ms: list[float] = field(default_factory=lambda: [5.0, 20.0, 50.0])  # link round-trip times, ms
    rate_mbps: float = 20.0  # link rate, both ways, Mbit/s
    prompts: int = 20  # test prompts: the first N of --prompts-file, else of the pair's test split
    prompts_file: str | None = None  # JSONL prompts (prompt, answer) to draft on; None = the pair's default test split
    pair: str | None = None  # named pair: toy | smollm2 (python -m wisv.pairs build smollm2); None = --drafter/--target
    max_new_tokens: int = 160  # generation budget per prompt, tokens
    proactive: int = 4  # tokens of proactive expansion of the best leaf (the tree+proactive method)
    calib_prompts: int = 100  # calib-split prompts (of the pair's task) that fit the calibrated rankings; 0: none
    drafter: str | None = None  # local HF drafter directory; None = the built-in pair
    target: str | None = None  # local HF target directory; None = the built-in pair
    out: str = "runs/bench_tree"  # output directory (the committed one: results/bench_tree)


def _bytes(msg_type: MsgType, tensors: dict, **header) -> int:
    return frame_bytes(encode(make(msg_type, "ue0-0", tensors, **header)))


def _verdict_bytes(n: int, next_token: int, path: list[int] | None) -> int:
    tensors = None if path is None else {"path": torch.tensor(path, dtype=torch.int32).numpy()}
    return _bytes(MsgType.VERDICT, tensors, round=0, n_accepted=n, next_token=next_token, mismatches=0, queried=0,
                  t_verify_s=0.0, t_head_s=0.0, t_edge_s=0.0, batch=1, done=False)


def chain_rounds(drafter, target, ids: list[int], k: int, max_new: int, eos: int) -> tuple[list[int], list[dict]]:
    """Greedy chain SD with each round's measured compute and wire bytes."""
    d, t, proto = DraftSession(drafter, ids), VerifySession(target, ids), get_protocol("greedy")
    out, rows = [], []
    while len(out) < max_new:
        left = max_new - len(out)
        t0 = time.perf_counter()
        dr = d.draft(max(1, min(k, left - 1)), eos_token_id=eos)
        t1 = time.perf_counter()
        blk = t.verify(dr.tokens)
        v = greedy_accept_ids(torch.tensor(dr.tokens), blk.argmax)
        committed = t.commit(dr.tokens, v.n_accepted, v.next_token)
        t2 = time.perf_counter()
        d.commit(committed)
        up = _bytes(MsgType.DRAFT, proto.uplink(dr), round=0, t_draft_s=0.0, protocol="greedy")
        rows.append({"drafted": len(dr.tokens), "accepted": v.n_accepted, "calls": len(dr.tokens),
                     "t_draft_s": t1 - t0, "t_verify_s": t2 - t1, "t_proactive_s": 0.0, "up": up,
                     "down": _verdict_bytes(v.n_accepted, v.next_token, None)})
        committed = truncate_output(committed, left, eos)
        out.extend(committed)
        if committed[-1] == eos:
            break
    return out, rows


def tree_rounds(drafter, target, ids: list[int], n: int, max_new: int, eos: int, proactive: int,
                score: Score | None = None, children: int | None = None):
    """Tree SD (wisv.decoding.treespec) with each round's measured compute and wire bytes (``children`` 1: a chain, sent
    as a chain DRAFT)."""
    res = tree_generate(drafter, target, ids, max_new_tokens=max_new, budget=n, proactive=proactive, eos_token_id=eos,
                        score=score, children=children)
    name = "greedy" if children == 1 else "tree"
    proto, rows = get_protocol(name), []
    for r in res.rounds:
        parents = None if children == 1 else [-1] * r.size
        draft = Draft([1] * r.size, None, None, parents=parents)  # bytes depend on the size only
        up = _bytes(MsgType.DRAFT, proto.uplink(draft), round=0, t_draft_s=0.0, protocol=name)
        rows.append({"drafted": r.size, "accepted": r.accepted, "calls": r.calls, "depth": r.depth,
                     "reused": r.reused, "t_draft_s": r.t_draft_s, "t_verify_s": r.t_verify_s,
                     "t_proactive_s": r.t_proactive_s, "up": up,
                     "down": _verdict_bytes(r.accepted, 0, list(range(r.accepted)))})
    return res.tokens, rows


def latency_s(rows: list[dict], rtt_ms: float, rate_mbps: float) -> float:
    """Modelled time of one prompt's rounds on the link (see the module docstring)."""
    total = 0.0
    for r in rows:
        link = rtt_ms / 1e3 + 8 * (r["up"] + r["down"]) / (rate_mbps * 1e6)
        total += r["t_draft_s"] + max(link + r["t_verify_s"], r["t_proactive_s"])
    return total


def summarize(runs: list[tuple[list[int], list[dict]]], refs: list[list[int]], cfg: BenchConfig) -> dict:
    rows = [r for _, rs in runs for r in rs]
    n = len(rows)
    out = {"rounds": n, "aal": summarize_rounds(pd.DataFrame(rows))["aal"],
           "tokens_per_verification": sum(len(toks) for toks, _ in runs) / n,
           "drafter_calls_per_round": sum(r["calls"] for r in rows) / n,
           "t_draft_ms_per_round": 1e3 * statistics.mean(r["t_draft_s"] for r in rows),
           "t_verify_ms_per_round": 1e3 * statistics.mean(r["t_verify_s"] for r in rows),
           "uplink_bytes_per_round": statistics.mean(r["up"] for r in rows),
           "matches_target": sum(toks == ref for (toks, _), ref in zip(runs, refs)) / len(refs)}
    if "depth" in rows[0]:
        out |= {"tree_depth": statistics.mean(r["depth"] for r in rows),
                "proactive_reused_per_round": statistics.mean(r["reused"] for r in rows)}
    out["latency_s"] = {str(rtt): statistics.mean(latency_s(rs, rtt, cfg.rate_mbps) for _, rs in runs)
                        for rtt in cfg.rtts_ms}
    return out


def run(cfg: BenchConfig) -> dict:
    torch.set_num_threads(1)
    cfg = apply_pair(cfg)
    drafter, target, tok = load_pair(cfg.drafter, cfg.target)
    eos = eos_id(target)
    prompts = [r["prompt_ids"] for r in prompt_rows(tok, "test", cfg.prompts, cfg.prompts_file)]
    refs = [greedy_reference(target, ids, cfg.max_new_tokens) for ids in prompts]
    methods = {"chain": lambda ids, b: chain_rounds(drafter, target, ids, b, cfg.max_new_tokens, eos),
               "tree": lambda ids, b: tree_rounds(drafter, target, ids, b, cfg.max_new_tokens, eos, 0),
               f"tree+proactive{cfg.proactive}": lambda ids, b: tree_rounds(drafter, target, ids, b,
                                                                           cfg.max_new_tokens, eos, cfg.proactive)}
    cals = fit_calibrations(drafter, target, tok, cfg)

    def scored(cal: Calibration, children: int | None):
        return lambda ids, b: tree_rounds(drafter, target, ids, b, cfg.max_new_tokens, eos, 0, cal.score, children)

    for tag, cal in cals.items():
        methods |= {f"chain+{tag}": scored(cal, 1), f"tree+{tag}": scored(cal, None)}
    results = {}
    for b in cfg.budgets:
        for name, fn in methods.items():
            results.setdefault(name, {})[str(b)] = s = summarize([fn(ids, b) for ids in prompts], refs, cfg)
            print(f"budget {b:>2} {name:<18} aal {s['aal']:.2f}  tokens/verification {s['tokens_per_verification']:.2f}"
                  f"  latency@{cfg.rtts_ms[1] if len(cfg.rtts_ms) > 1 else cfg.rtts_ms[0]:g}ms "
                  f"{s['latency_s'][str(cfg.rtts_ms[min(1, len(cfg.rtts_ms) - 1)])]:.3f} s  "
                  f"matches_target {s['matches_target']:.2f}", flush=True)
    return {"config": asdict(cfg), "machine": machine_info(), "methods": results, "goal": _goal(results),
            "calibrations": {tag: cal.to_dict() for tag, cal in cals.items()}}


def fit_calibrations(drafter, target, tok, cfg: BenchConfig) -> dict[str, Calibration]:
    """The calibrated rankings (wisv.decoding.treecal), fitted on the first ``calib_prompts`` prompts of the calib split
    (never the test prompts): ``cal`` by (rank, probability bin), ``tokcal`` per proposed token too."""
    if cfg.calib_prompts < 1:
        return {}
    calib_file = default_prompts_file(cfg.pair, "calib") if cfg.pair else None
    prompts = [r["prompt_ids"] for r in prompt_rows(tok, "calib", cfg.calib_prompts, calib_file)]
    data = collect(drafter, target, prompts, cfg.max_new_tokens)
    return {"cal": fit(*data), "tokcal": fit(*data, by_token=True)}


def _goal(results: dict) -> dict:
    """Tree over chain tokens per verification at the goal budget: each tree method over the drafter's chain and
    over the chain ranked by the same scores (the fair comparison for a calibrated tree)."""
    b = str(GOAL_BUDGET)
    if b not in results["chain"]:
        return {"checked": False}

    def ratio(a: str, c: str) -> float:
        return results[a][b]["tokens_per_verification"] / results[c][b]["tokens_per_verification"]

    trees = [m for m in results if m == "tree" or m.startswith("tree+") and f"chain+{m[5:]}" in results]
    over_chain = {m: ratio(m, "chain") for m in trees}
    over_same = {m: ratio(m, "chain" if m == "tree" else f"chain+{m[5:]}") for m in trees}
    return {"checked": True, "budget": GOAL_BUDGET, "tree_over_chain_tokens_per_verification": over_chain["tree"],
            "tree_over_chain_aal": results["tree"][b]["aal"] / results["chain"][b]["aal"],
            "over_drafter_chain": over_chain, "over_same_scoring_chain": over_same,
            "met": over_chain["tree"] >= GOAL_RATIO,
            "met_by_any_over_drafter_chain": max(over_chain.values()) >= GOAL_RATIO,
            "met_by_any_over_same_scoring_chain": max(over_same.values()) >= GOAL_RATIO}


def parse_args(argv: list[str] | None = None) -> BenchConfig:
    return config.parse(BenchConfig, argv, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    if config.run_reporting("python -m scripts.bench.tree", lambda: write_report(cfg, run(cfg))):
        sys.exit(2)


def write_report(cfg: BenchConfig, report: dict) -> None:
    """Write bench_tree.json and print the goal's verdict."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_tree.json").write_text(json.dumps(report, indent=2) + "\n")
    g = report["goal"]
    if g["checked"]:
        print(f"tree / chain at budget {g['budget']}: "
              f"tokens per verification x{g['tree_over_chain_tokens_per_verification']:.3f}"
              f", aal x{g['tree_over_chain_aal']:.3f} (goal x{GOAL_RATIO}: {'met' if g['met'] else 'not met'})")
        for m, r in g["over_drafter_chain"].items():
            print(f"  {m:<12} / chain x{r:.3f}   / same-scoring chain x{g['over_same_scoring_chain'][m]:.3f}")
    print(f"wrote {out / 'bench_tree.json'}")


if __name__ == "__main__":
    main()
