"""Benchmark ``--draft-len auto`` on a time-varying link: latency per prompt against every fixed K and the oracle.

Usage: ``python -m scripts.bench.window [--pair toy] [--ks 4 8 16 32] [--repeats 3] [--prompts 20] --out DIR``.
Each repeat runs, in a rotated order, ``python -m testbed.run --protocol greedy`` once per fixed K, once with
``--draft-len auto`` and once with the per-segment oracle (``--draft-len-by-rtt``: in each link state, the fixed K
with the least time per committed token in that state over the fixed-K runs so far), all on the same prompts and
the same CSI trace (default: the shipped ``scripts/link/traces/alternating_10s.csv``, 200 Mbps / 5 ms <-> 3 Mbps / 60 ms
every 10 s).  Interleaving spreads the machine's load over the variants.  Latency per prompt is each run's
``latency_s`` (OPEN to the last VERDICT, testbed/common/summary.py); ``matches_target`` checks losslessness.
Writes ``bench_window.json`` (every run, the per-variant medians, the oracle's K per state, the goals) and the
runs under ``--out``.  A benchmark, not a test.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

import config
from testbed.common.machine import machine_info
from wisv.records.rows import read_records

ROOT = Path(__file__).resolve().parents[2]
GOAL_VS_FIXED_PCT, GOAL_VS_ORACLE_PCT = 10.0, 5.0  # auto >= 10% below the best fixed K; within 5% of the oracle


@dataclass
class BenchConfig:
    """bench_window settings (saved beside the JSON)."""

    out: str = "runs/bench_window"  # output directory: bench_window.json, runs/ (committed: results/window/)
    pair: str = "toy"  # named pair: toy | smollm2
    ks: list[int] = field(default_factory=lambda: [4, 8, 16, 32],
                          metadata={"min": 1})  # the fixed windows compared, tokens
    repeats: int = field(default=3, metadata={"min": 1})  # interleaved repeats of every variant
    prompts: int = field(default=20, metadata={"min": 1})  # prompts per run
    max_new_tokens: int = field(default=160, metadata={"min": 1})  # generation budget per prompt, tokens
    csi_trace: str = "scripts/link/traces/alternating_10s.csv"  # the time-varying link
    draft_len_max: int = field(default=32, metadata={"min": 1})  # auto's largest K, tokens
    timeout_s: float = field(default=1800.0, metadata={"above": 0})  # one run's time limit, s


def run_one(cfg: BenchConfig, variant: str, args: list[str], out: Path) -> dict:
    """One testbed.run; its summary and rounds."""
    cmd = [sys.executable, "-m", "testbed.run", "--protocol", "greedy", "--pair", cfg.pair, "--prompts",
           str(cfg.prompts), "--max-new-tokens", str(cfg.max_new_tokens), "--csi-trace", cfg.csi_trace,
           "--draft-len-max", str(cfg.draft_len_max), "--out", str(out), "--overwrite", *args]
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=cfg.timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant}: testbed.run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    s = json.loads((out / "greedy" / "summary.json").read_text())
    print(f"  {variant}: latency {s['latency_s']:.3f} s/prompt, aal {s['aal']:.2f}, matches_target "
          f"{s.get('matches_target')} ({time.time() - t0:.0f} s)", flush=True)
    return {"variant": variant, "args": args, "latency_s": s["latency_s"], "aal": s["aal"],
            "matches_target": s.get("matches_target"), "throughput_tok_s": s.get("throughput_tok_s"),
            "wall_s": time.time() - t0, "dir": str(out)}


def per_state_s_per_token(run_dirs: list[Path]) -> pd.DataFrame:
    """Seconds per committed token of each run's rounds, by the RTT in force."""
    rows = []
    for d in run_dirs:
        r = read_records(d / "greedy" / "rounds.csv")
        for rtt, g in r.groupby("rtt_ms"):
            rows.append({"dir": str(d), "rtt_ms": float(rtt), "t_s": g["t_round_s"].sum(),
                         "tokens": g["committed"].sum()})
    return pd.DataFrame(rows)


def oracle_table(runs: list[dict]) -> dict[float, int]:
    """Per RTT state, the fixed K with the least time per committed token over the fixed-K runs so far."""
    fixed = [r for r in runs if r["variant"].startswith("K=")]
    st = per_state_s_per_token([Path(r["dir"]) for r in fixed])
    st["k"] = st["dir"].map({r["dir"]: int(r["variant"][2:]) for r in fixed})
    agg = st.groupby(["rtt_ms", "k"])[["t_s", "tokens"]].sum()
    agg["s_per_token"] = agg["t_s"] / agg["tokens"]
    return {float(rtt): int(g["s_per_token"].idxmin()[1]) for rtt, g in agg.groupby(level=0)}


def run(cfg: BenchConfig) -> dict:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    variants = [f"K={k}" for k in cfg.ks] + ["auto"]
    runs, oracle = [], {}
    for rep in range(cfg.repeats):
        order = variants[rep % len(variants):] + variants[:rep % len(variants)]  # rotated: interleaved
        print(f"repeat {rep + 1}/{cfg.repeats}: {order + ['oracle']}", flush=True)
        for v in order:
            args = ["--draft-len", v[2:] if v.startswith("K=") else "auto"]
            runs.append(run_one(cfg, v, args, out / "runs" / f"{rep}-{v.replace('=', '')}") | {"repeat": rep})
        oracle = oracle_table(runs)
        spec = ",".join(f"{rtt:g}:{k}" for rtt, k in oracle.items())
        runs.append(run_one(cfg, "oracle", ["--draft-len-by-rtt", spec], out / "runs" / f"{rep}-oracle")
                    | {"repeat": rep, "oracle_k": spec})
        write(cfg, out, runs, oracle)
    return write(cfg, out, runs, oracle)


def write(cfg: BenchConfig, out: Path, runs: list[dict], oracle: dict[float, int]) -> dict:
    """bench_window.json from the runs so far, and the table printed."""
    med = {v: statistics.median(r["latency_s"] for r in runs if r["variant"] == v)
           for v in dict.fromkeys(r["variant"] for r in runs)}
    fixed = {v: t for v, t in med.items() if v.startswith("K=")}
    best = min(fixed, key=fixed.get)
    goals = {"best_fixed": best,
             "auto_vs_best_fixed_pct": 100 * (1 - med["auto"] / fixed[best]) if "auto" in med else None,
             "auto_vs_oracle_pct": 100 * (med["auto"] / med["oracle"] - 1) if "oracle" in med else None,
             "goal_vs_fixed_pct": GOAL_VS_FIXED_PCT, "goal_vs_oracle_pct": GOAL_VS_ORACLE_PCT,
             "auto_lossless": all(r["matches_target"] == 1.0 for r in runs if r["variant"] == "auto")}
    states = per_state_s_per_token([Path(r["dir"]) for r in runs])
    states["variant"] = states["dir"].map({r["dir"]: r["variant"] for r in runs})
    by_state = states.groupby(["variant", "rtt_ms"])[["t_s", "tokens"]].sum()
    by_state["ms_per_token"] = 1e3 * by_state["t_s"] / by_state["tokens"]
    result = {"config": asdict(cfg), "machine": machine_info(), "median_latency_s": med, "goals": goals,
              "oracle_k_by_rtt_ms": oracle, "ms_per_token_by_state": {
                  f"{v} @ {rtt:g} ms": float(x) for (v, rtt), x in by_state["ms_per_token"].items()},
              "runs": runs}
    (out / "bench_window.json").write_text(json.dumps(result, indent=1))
    config.write_config_beside(out / "bench_window.json", cfg)
    print(pd.Series(med, name="median latency_s per prompt").to_string(float_format=lambda v: f"{v:.3f}"))
    print(by_state["ms_per_token"].unstack().to_string(float_format=lambda v: f"{v:.2f}"))
    print(json.dumps(goals))
    return result


def main(argv: list[str] | None = None) -> None:
    cfg = config.parse(BenchConfig, argv, description=__doc__.splitlines()[0])
    run(cfg)


if __name__ == "__main__":
    main()
