"""Crossover map (issue 58 item 7): on a grid of link rate x RTT, which protocol is fastest, measured and predicted.

Each cell is one ``testbed.run`` of every protocol in ``--protocols`` on the same prompts (``--head none``: fh, sh
and auto's rounds are then lossless, so every edge protocol commits the target's greedy output and their latencies
compare like for like); the measured winner is the lowest mean ``latency_s`` per prompt (the run's summary.csv).
Two winners per cell: among the lossless protocols (the description's ``lossless``: the target's quality), and
overall (on-device included: it is lossy, its output is the drafter's).  Beside it the latency model's winner
(``testbed.simulate`` over the same prompts, rates and RTTs, the ``local`` profile on both ends, the wire format;
a chooser such as ``auto`` is not simulated, so the prediction picks among the others).  Resumable: a cell whose
run directory is complete is not run again.  Writes ``cells.csv``, ``crossover.json`` (config, load, agreement) and
``crossover.png`` in ``--out``.

    python -m scripts.bench.crossover --out runs/crossover/toy
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

import config
from wisv.timing.protodesc import describe


@dataclass
class CrossoverConfig:
    """One crossover map (written into crossover.json and as config.toml beside it)."""

    out: str = "runs/crossover"  # output directory (the committed map: results/crossover/toy)
    rates_mbps: list[float] = field(default_factory=lambda: [1.0, 5.0, 20.0, 100.0], metadata={
        "above": 0})  # link rates, Mbit/s
    rtts_ms: list[float] = field(default_factory=lambda: [5.0, 20.0, 50.0, 100.0], metadata={
        "min": 0})  # round-trip times, ms
    protocols: list[str] = field(default_factory=lambda: ["server", "device", "greedy", "fh", "sh", "auto", "tree"])
    #   protocols run in every cell (the baselines, the speculative ones, the chooser)
    prompts: int = field(default=3, metadata={"min": 1})  # prompts per cell
    max_new_tokens: int = field(default=32, metadata={"min": 1})  # generation budget per prompt, tokens
    draft_len: int = field(default=8, metadata={"min": 1})  # K of every speculative protocol, tokens
    pair: str | None = None  # named pair (None: the built-in toy pair)
    local_profile: str = "results/local_profile.json"  # the calibrated `local` profile the prediction uses


def cell_dir(cfg: CrossoverConfig, rate: float, rtt: float) -> Path:
    return Path(cfg.out) / "cells" / f"{rate:g}mbps_{rtt:g}ms"


def run_cell(cfg: CrossoverConfig, rate: float, rtt: float) -> Path:
    """One testbed.run of every protocol at this link (skipped when its directory is complete)."""
    d = cell_dir(cfg, rate, rtt)
    if (d / "complete").exists() and (d / "summary.csv").is_file():
        return d
    cmd = [sys.executable, "-m", "testbed.run", "--protocol", ",".join(cfg.protocols), "--prompts", str(cfg.prompts),
           "--max-new-tokens", str(cfg.max_new_tokens), "--draft-len", str(cfg.draft_len), "--head", "none",
           "--rate-mbps", str(rate), "--rtt-ms", str(rtt), "--out", str(d), "--overwrite", "--no-reference"]
    if cfg.pair:
        cmd += ["--pair", cfg.pair]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return d


def winners(latency: dict[str, float]) -> tuple[str, str]:
    """(the fastest lossless protocol, the fastest overall) of mean latencies per prompt by protocol (pure)."""
    lossless = {p: v for p, v in latency.items() if describe(p).lossless}
    return min(lossless, key=lossless.get), min(latency, key=latency.get)


def measured(d: Path) -> dict[str, float]:
    s = pd.read_csv(d / "summary.csv")
    return dict(zip(s["protocol"], s["latency_s"].astype(float)))


def predicted(cfg: CrossoverConfig) -> pd.DataFrame:
    """The latency model's table on the same prompts and grid (every protocol but the choosers)."""
    methods = [p for p in cfg.protocols if not describe(p).chooses]
    out = Path(cfg.out) / "simulate"
    cmd = [sys.executable, "-m", "testbed.simulate", "--methods", *methods, "--draft-lens", str(cfg.draft_len),
           "--rates-mbps", *map(str, cfg.rates_mbps), "--rtts-ms", *map(str, cfg.rtts_ms), "--prompts",
           str(cfg.prompts), "--max-new-tokens", str(cfg.max_new_tokens), "--head", "none", "--ue-profile", "local",
           "--edge-profile", "local", "--payload", "wire", "--local-profile", cfg.local_profile, "--out", str(out)]
    if cfg.pair:
        cmd += ["--pair", cfg.pair]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return pd.read_csv(out / "table.csv")


def cell_rows(cfg: CrossoverConfig, sim: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for rate in cfg.rates_mbps:
        for rtt in cfg.rtts_ms:
            meas = measured(cell_dir(cfg, rate, rtt))
            g = sim[(sim["rate_mbps"] == rate) & (sim["rtt_ms"] == rtt)]
            pred = dict(zip(g["protocol"], g["latency_s"].astype(float)))
            (m_ll, m_all), (p_ll, p_all) = winners(meas), winners(pred)
            rows.append({"rate_mbps": rate, "rtt_ms": rtt, "measured_lossless": m_ll, "predicted_lossless": p_ll,
                         "measured_overall": m_all, "predicted_overall": p_all,
                         **{f"measured_s_{p}": v for p, v in meas.items()},
                         **{f"predicted_s_{p}": v for p, v in pred.items()}})
    return pd.DataFrame(rows)


def figure(cells: pd.DataFrame, path: Path, title: str) -> None:
    """Two panels (measured, predicted): a grid coloured by the lossless winner, the overall winner written in."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = sorted(set(cells["measured_lossless"]) | set(cells["predicted_lossless"]))
    rates, rtts = sorted(cells["rate_mbps"].unique()), sorted(cells["rtt_ms"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, kind in zip(axes, ("measured", "predicted")):
        grid = [[names.index(cells[(cells.rate_mbps == r) & (cells.rtt_ms == t)][f"{kind}_lossless"].iloc[0])
                 for r in rates] for t in rtts]
        ax.imshow(grid, cmap="tab10", vmin=0, vmax=9, origin="lower", aspect="auto")
        for i, t in enumerate(rtts):
            for j, r in enumerate(rates):
                c = cells[(cells.rate_mbps == r) & (cells.rtt_ms == t)].iloc[0]
                ax.text(j, i, f"{c[f'{kind}_lossless']}\n({c[f'{kind}_overall']})", ha="center", va="center",
                        fontsize=8)
        ax.set_xticks(range(len(rates)), [f"{r:g}" for r in rates])
        ax.set_yticks(range(len(rtts)), [f"{t:g}" for t in rtts])
        ax.set_xlabel("rate, Mbit/s")
        ax.set_ylabel("RTT, ms")
        ax.set_title(f"{kind}: lossless winner (overall)")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> CrossoverConfig:
    return config.parse(CrossoverConfig, argv, prog="python -m scripts.bench.crossover", description=__doc__)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    try:
        [describe(p) for p in cfg.protocols]  # an unknown protocol: one line, exit 2, before anything runs
    except ValueError as e:
        print(f"python -m scripts.bench.crossover: error: --protocols: {e}", file=sys.stderr)
        return 2
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    config.write_config(out, cfg, config.provenance())
    t0, load0 = time.time(), os.getloadavg()
    for rate in cfg.rates_mbps:
        for rtt in cfg.rtts_ms:
            run_cell(cfg, rate, rtt)
    cells = cell_rows(cfg, predicted(cfg))
    cells.to_csv(out / "cells.csv", index=False)
    agree = {k: int((cells[f"measured_{k}"] == cells[f"predicted_{k}"]).sum()) for k in ("lossless", "overall")}
    doc = {"config": asdict(cfg), "cells": len(cells), "agreement": agree, "wall_s": time.time() - t0,
           "load_average_start": load0, "load_average_end": os.getloadavg(),
           "predicted_from": "testbed.simulate, local profile on both ends, wire payloads; choosers not simulated"}
    (out / "crossover.json").write_text(json.dumps(doc, indent=1))
    figure(cells, out / "crossover.png", f"{cfg.pair or 'toy'} pair, {cfg.prompts} prompts x {cfg.max_new_tokens} "
                                         f"tokens, K={cfg.draft_len}; agreement {agree}")
    print(cells[["rate_mbps", "rtt_ms", "measured_lossless", "predicted_lossless", "measured_overall",
                 "predicted_overall"]].to_string(index=False))
    print(f"agreement, measured vs predicted winner: lossless {agree['lossless']}/{len(cells)}, overall "
          f"{agree['overall']}/{len(cells)}; wrote {out / 'cells.csv'}, {out / 'crossover.json'}, "
          f"{out / 'crossover.png'}")
    return 0


if __name__ == "__main__":  # a cell's run that fails (a resource, a lost edge) is one line, exit 2
    rc: list[int] = []
    sys.exit(config.run_reporting("python -m scripts.bench.crossover", lambda: rc.append(main()),
                                  (ValueError, OSError, subprocess.CalledProcessError)) or rc[0])
