"""Server capacity and cost, speculation against server-only, on a GPU edge's roofline (wisv/timing/capacity.py).

Usage: ``python -m scripts.bench.capacity [--edge-profile a100] [--arch-target llama-3.1-8b] [--batches 1 2 4 8 16 32]
[--draft-len 8] [--aals 0.74 5.88] [--context 512] [--out runs/capacity.json]``.  For each drafter AAL and batch size:
the edge's server throughput (committed tokens per second of compute) of server-only and of speculation, their ratio
beside SpecEdge's claimed 2.22x, the break-even AAL (speculation's throughput equals server-only's), and tokens per
dollar at the configured prices.  A model, not a measurement: the GPU check's server stage measures the same passes.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import config
from wisv.timing.capacity import Prices, capacity, cost_row
from wisv.timing.compute import ARCHITECTURES, get_architecture
from wisv.timing.hardware import PROFILES, get_profile

SPECEDGE_THROUGHPUT_RATIO = 2.22  # SpecEdge (arXiv 2505.17052): server throughput against server-only
SPECEDGE_COST_RATIO = 1.91  # SpecEdge: cost efficiency against server-only


@dataclass
class CapacityConfig:
    """One capacity table (written into the JSON)."""

    edge_profile: str = field(default="a100", metadata={"choices": tuple(PROFILES)})  # the edge's GPU (roofline)
    arch_target: str = field(default="llama-3.1-8b", metadata={"choices": tuple(ARCHITECTURES)})  # the target's shape
    batches: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32], metadata={"min": 1})  # sessions a pass
    draft_len: int = field(default=8, metadata={"min": 1})  # K, tokens a block
    aals: list[float] = field(default_factory=lambda: [0.74, 5.88], metadata={
        "min": 0})  # drafters' accepted tokens per round: the SmolLM2 pair's on unseen questions (issue 58's run,
    #   K = 8), the toy pair's (README's table, K = 8)
    context: int = field(default=512, metadata={"min": 0})  # cached positions a session
    server_usd_per_hour: float = field(default=1.50, metadata={"above": 0})  # the edge server's price, $/h
    device_usd_per_hour: float = field(default=0.10, metadata={"min": 0})  # one UE drafter device's price, $/h
    out: str = "runs/capacity.json"  # the JSON written


def table(cfg: CapacityConfig) -> list[dict]:
    """Every (AAL, batch) row: the throughputs, ratio, break-even AAL and tokens per dollar."""
    dims, prof = get_architecture(cfg.arch_target), get_profile(cfg.edge_profile)
    prices = Prices(cfg.server_usd_per_hour, cfg.device_usd_per_hour)
    rows = []
    for aal in cfg.aals:
        for b in cfg.batches:
            c = capacity(dims, prof, b, cfg.draft_len, min(aal, cfg.draft_len), cfg.context)
            rows.append({"aal": aal, **cost_row(c, prices), "break_even_aal": c.verify_s / c.decode_s - 1})
    return rows


def main(argv: list[str] | None = None) -> dict:
    cfg = config.parse(CapacityConfig, argv, description=__doc__.splitlines()[0])
    rows = table(cfg)
    doc = {"config": asdict(cfg), "rows": rows, "specedge": {"throughput_ratio": SPECEDGE_THROUGHPUT_RATIO,
                                                              "cost_efficiency_ratio": SPECEDGE_COST_RATIO}}
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{cfg.arch_target} on {cfg.edge_profile}, K = {cfg.draft_len}, context {cfg.context} "
          f"(SpecEdge: {SPECEDGE_THROUGHPUT_RATIO}x throughput, {SPECEDGE_COST_RATIO}x cost efficiency)")
    print(f"{'aal':>5} {'batch':>5} {'decode_ms':>9} {'verify_ms':>9} {'thr_ratio':>9} {'break_even':>10} "
          f"{'cost_ratio':>10}")
    for r in rows:
        print(f"{r['aal']:5.2f} {r['batch']:5d} {r['decode_ms']:9.2f} {r['verify_ms']:9.2f} "
              f"{r['throughput_ratio']:9.2f} {r['break_even_aal']:10.2f} {r['cost_efficiency_ratio']:10.2f}")
    return doc


if __name__ == "__main__":  # bad input is one line, exit 2
    sys.exit(config.run_reporting("python -m scripts.bench.capacity", main, (ValueError, OSError)))
