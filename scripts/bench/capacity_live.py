"""Capacity live on this machine: one edge, N UEs, speculation against server-only at the same batch limit.

Usage: ``python -m scripts.bench.capacity_live [--pair smollm2] [--ues 1 2 4] [--prompts-per-ue 4]
[--protocols server greedy] [--slo-tok-s 100] [--out runs/capacity_live]``

For each N and protocol, one ``python -m testbed.run --ues N --protocol P --batch-verify --max-batch N`` (the
batching edge: concurrent DRAFTs verified in one pass, server-only's decode steps batched across streams, as vLLM's
continuous batching does) on N x ``--prompts-per-ue`` prompts over the emulated link.  From each run's outputs and
summary: the server's throughput (every UE's committed tokens over the makespan, the longest UE's summed
end-to-end time: the UEs run side by side, each its prompts in turn), each UE's tokens/s, the UEs at or above
``--slo-tok-s`` (SpecEdge's and WISP's SLO), and the run's inter-token latency (vLLM's ``mean_itl_ms``,
``p99_itl_ms``).  Each speculative protocol's throughput is reported over server-only's at the same N.  Writes
``capacity.csv`` and ``capacity.json`` (the config, the machine, its load before and after) under ``--out``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

import config
from testbed.common.machine import machine_info
from wisv.timing.protodesc import describe

PROG = "python -m scripts.bench.capacity_live"
BASELINE = "server"


@dataclass
class CapacityConfig:
    """One live capacity sweep (capacity.json keeps it)."""

    pair: str | None = None  # named pair (testbed.run --pair); None: the built-in toy pair
    ues: list[int] = field(default_factory=lambda: [1, 2, 4], metadata={"min": 1})  # UE counts N to run
    prompts_per_ue: int = field(default=4, metadata={"min": 1})  # prompts each UE runs in turn
    protocols: list[str] = field(default_factory=lambda: ["server", "greedy"])  # protocols (server always runs)
    max_new_tokens: int = field(default=64, metadata={"min": 1})  # generation budget per prompt, tokens
    slo_tok_s: float = field(default=100.0, metadata={"min": 0})  # a UE meets its SLO at this many tokens/s
    rate_mbps: float = field(default=200.0, metadata={"min": 0})  # the emulated link's rate each way, Mbit/s
    rtt_ms: float = field(default=5.0, metadata={"min": 0})  # the emulated link's round-trip time, ms
    out: str = "runs/capacity_live"  # output directory (N<n>-<protocol>: one testbed.run each)


def run_argv(cfg: CapacityConfig, n: int, protocol: str, out: Path) -> list[str]:
    """testbed.run's argv for N UEs of one protocol on the batching edge."""
    pair = ["--pair", cfg.pair] if cfg.pair else []
    return ["--protocol", protocol, *pair, "--ues", str(n), "--batch-verify", "--max-batch", str(n),
            "--prompts", str(n * cfg.prompts_per_ue), "--max-new-tokens", str(cfg.max_new_tokens),
            "--rate-mbps", str(cfg.rate_mbps), "--rtt-ms", str(cfg.rtt_ms), "--no-reference",
            "--out", str(out), "--overwrite"]


def ue_speeds(outputs: pd.DataFrame) -> pd.DataFrame:
    """Per UE: its committed tokens, its summed end-to-end time (s) and its tokens/s (finished prompts only)."""
    ok = outputs[outputs["error"].isna()] if "error" in outputs else outputs
    g = ok.assign(n=ok["tokens"].map(len)).groupby("ue_id")
    per = pd.DataFrame({"tokens": g["n"].sum(), "busy_s": g["t_e2e_s"].sum()})
    return per.assign(tok_s=per["tokens"] / per["busy_s"])


def capacity_row(n: int, protocol: str, outputs: pd.DataFrame, summary: pd.Series, slo_tok_s: float) -> dict:
    """One (N, protocol) row: server throughput over the makespan, per-UE speeds, UEs at SLO, ITL."""
    per = ue_speeds(outputs)
    makespan = float(per["busy_s"].max())
    return {"ues": n, "protocol": protocol, "tokens": int(per["tokens"].sum()), "makespan_s": makespan,
            "server_tok_s": float(per["tokens"].sum()) / makespan, "ue_tok_s_mean": float(per["tok_s"].mean()),
            "ue_tok_s_min": float(per["tok_s"].min()), "ues_at_slo": int((per["tok_s"] >= slo_tok_s).sum()),
            "mean_itl_ms": float(summary.get("mean_itl_ms", float("nan"))),
            "p99_itl_ms": float(summary.get("p99_itl_ms", float("nan"))),
            "aal": float(summary.get("aal", float("nan"))), "errors": int(summary.get("errors", 0))}


def with_ratios(table: pd.DataFrame) -> pd.DataFrame:
    """The table with each protocol's server throughput over server-only's at the same N."""
    base = table[table["protocol"] == BASELINE].set_index("ues")["server_tok_s"]
    return table.assign(throughput_vs_server=table["server_tok_s"] / table["ues"].map(base))


def read_run(d: Path, protocol: str) -> tuple[pd.DataFrame, pd.Series]:
    """A finished run's outputs and its summary row for ``protocol``."""
    outputs = pd.read_json(d / protocol / "outputs.jsonl", lines=True, dtype={"prompt_id": str, "ue_id": str})
    summary = pd.read_csv(d / "summary.csv").set_index("protocol").loc[protocol]
    return outputs, summary


def run(cfg: CapacityConfig) -> pd.DataFrame:
    """Every (N, protocol) run in turn, then the table."""
    for p in cfg.protocols:
        describe(p)  # an unknown name: one line before anything runs
    out = Path(cfg.out)
    protocols = [BASELINE] + [p for p in cfg.protocols if p != BASELINE]
    loads, rows = {"load_before": os.getloadavg()}, []
    for n in cfg.ues:
        for p in protocols:
            d = out / f"N{n}-{p}"
            print(f"N={n} {p}", flush=True)
            d.parent.mkdir(parents=True, exist_ok=True)
            with (out / f"N{n}-{p}.log").open("w") as f:
                rc = subprocess.call([sys.executable, "-m", "testbed.run", *run_argv(cfg, n, p, d)], stdout=f,
                                     stderr=subprocess.STDOUT)
            if rc:
                raise ValueError(f"N={n} {p} failed (exit {rc}): see {out / f'N{n}-{p}.log'}")
            rows.append(capacity_row(n, p, *read_run(d, p), cfg.slo_tok_s))
    loads["load_after"] = os.getloadavg()
    table = with_ratios(pd.DataFrame(rows))
    table.to_csv(out / "capacity.csv", index=False)
    (out / "capacity.json").write_text(json.dumps({"config": asdict(cfg), "machine": machine_info(), "loads": loads,
                                                   "command": " ".join(sys.argv),
                                                   "table": table.to_dict("records")}, indent=1))
    return table


def main(argv: list[str] | None = None) -> None:
    cfg = config.parse(CapacityConfig, argv, prog=PROG, description=__doc__.splitlines()[0])
    try:
        table = run(cfg)
    except ValueError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"results in {cfg.out}")


if __name__ == "__main__":
    main()
