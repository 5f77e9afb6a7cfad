"""Benchmark the UE's live CSI estimate: per-round error of the estimated rates and RTT against the emulated link.

Usage: ``python -m scripts.bench.csi [--links 20:20,3:45] [--prompts 10] [--protocol sh] [--out runs/bench_csi]``.
Each link (RATE_MBPS:RTT_MS) gets one ``testbed.run --csi measured`` (the head and auto condition on the estimate,
as on a real link; runs under --out/runs).  For every round its error is ``estimate / configured - 1`` of the rate
up, the rate down and the RTT (the estimate the round was drafted with).  A link passes when the rate estimate of
both directions is within ``--tol`` of the configured rate in at least ``--goal`` of its rounds.  Writes
bench_csi.json (quantiles, the fraction within tolerance, and every round's errors) and exits 0 even when a link
fails; the failed ones are printed.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

import config
from testbed.common.files import write_json_atomic
from testbed.common.machine import machine_info
from wisv.records.rows import read_records

ROOT = Path(__file__).resolve().parents[2]

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)  # of each per-round error in the report
COLUMNS = {"rate_up": ("est_rate_up_mbps", "rate_up_mbps"), "rate_down": ("est_rate_down_mbps", "rate_down_mbps"),
           "rtt": ("est_rtt_ms", "rtt_ms")}  # error name -> (estimated, configured) RoundRow columns


@dataclass
class BenchCSIConfig:
    """One benchmark run (written into bench_csi.json)."""

    out: str = "runs/bench_csi"  # output directory (runs under OUT/runs; the committed one: results/bench_csi)
    links: list[str] = field(default_factory=lambda: ["20:20", "3:45"])  # emulated links RATE_MBPS:RTT_MS
    prompts: int = field(default=10, metadata={"min": 1})  # prompts per link
    protocol: str = "sh"  # protocol of every run
    max_new_tokens: int = field(default=160, metadata={"min": 1})  # generation budget per prompt, tokens
    tol: float = 0.20  # a round's rate estimate passes when |estimate / configured - 1| <= tol
    goal: float = 0.95  # a link passes when this fraction of its rounds pass in both directions
    pair: str | None = None  # named pair (None: the built-in toy pair)


def parse_link(text: str) -> tuple[float, float]:
    """'20:20' -> (20.0 Mbit/s, 20.0 ms); a ValueError names a bad one."""
    try:
        rate, rtt = (float(x) for x in text.split(":"))
    except ValueError:
        raise ValueError(f"link {text!r}: expected RATE_MBPS:RTT_MS, e.g. 20:20") from None
    if not (rate > 0 and rtt >= 0):
        raise ValueError(f"link {text!r}: need a rate > 0 and an RTT >= 0")
    return rate, rtt


def round_errors(rounds: pd.DataFrame) -> pd.DataFrame:
    """Per round: estimate / configured - 1 of each COLUMNS entry (pure)."""
    return pd.DataFrame({name: rounds[est] / rounds[conf] - 1 for name, (est, conf) in COLUMNS.items()})


def error_report(errors: pd.DataFrame, tol: float, goal: float) -> dict:
    """Quantiles and the fraction within tol of each error, and whether the rate goal is met (pure)."""
    rep = {"rounds": len(errors)}
    for name in COLUMNS:
        e = errors[name].to_numpy(float)
        rep[name] = {"within_tol": float(np.mean(np.abs(e) <= tol)) if len(e) else 0.0,
                     "max_abs": float(np.max(np.abs(e))) if len(e) else None,
                     "quantiles": {str(q): float(np.quantile(e, q)) for q in QUANTILES} if len(e) else {}}
    both = (errors["rate_up"].abs() <= tol) & (errors["rate_down"].abs() <= tol)
    rep["rate_within_tol_both"] = float(both.mean()) if len(errors) else 0.0
    rep["passed"] = bool(len(errors) and rep["rate_within_tol_both"] >= goal)
    return rep


def run_link(cfg: BenchCSIConfig, link: str, out: Path) -> pd.DataFrame:
    """One testbed.run on the link with the measured CSI; its rounds."""
    rate, rtt = parse_link(link)
    cmd = [sys.executable, "-m", "testbed.run", "--protocol", cfg.protocol, "--prompts", str(cfg.prompts),
           "--rate-mbps", f"{rate:g}", "--rtt-ms", f"{rtt:g}", "--csi", "measured", "--no-reference",
           "--max-new-tokens", str(cfg.max_new_tokens), "--out", str(out), "--overwrite"]
    cmd += ["--pair", cfg.pair] if cfg.pair else []
    print(" ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return read_records(out / cfg.protocol / "rounds.csv")


def run(cfg: BenchCSIConfig) -> dict:
    for link in cfg.links:
        parse_link(link)  # fail before any run
    out = Path(cfg.out)
    report = {"config": asdict(cfg), "machine": machine_info(), "links": {}}
    for link in cfg.links:
        errors = round_errors(run_link(cfg, link, out / "runs" / (link.replace(":", "mbps_") + "ms")))
        rep = error_report(errors, cfg.tol, cfg.goal)
        rep["per_round"] = {k: [round(float(x), 5) for x in errors[k]] for k in COLUMNS}
        report["links"][link] = rep
        print(f"{link}: {rep['rounds']} rounds, rate within ±{cfg.tol:.0%} in both directions: "
              f"{rep['rate_within_tol_both']:.1%} (up p5/p50/p95 {_q(rep['rate_up'])}, down {_q(rep['rate_down'])}, "
              f"rtt p50 {rep['rtt']['quantiles'].get('0.5', float('nan')):+.3f}) -> "
              f"{'pass' if rep['passed'] else 'FAIL'}", flush=True)
    write_json_atomic(out / "bench_csi.json", report)
    config.write_config(out, cfg, report["machine"])
    return report


def _q(rep: dict) -> str:
    q = rep["quantiles"]
    return "/".join(f"{q[k]:+.3f}" for k in ("0.05", "0.5", "0.95")) if q else "-"


def parse_args(argv: list[str] | None = None) -> BenchCSIConfig:
    return config.parse(BenchCSIConfig, argv, prog="python -m scripts.bench.csi", description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> int:
    return config.run_reporting("python -m scripts.bench.csi", lambda: run(parse_args(argv)),
                                (ValueError, FileNotFoundError, subprocess.CalledProcessError))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
