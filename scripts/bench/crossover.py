"""Crossover map (issue 58 item 7): on a grid of link rate x RTT, which protocol is fastest, measured and predicted.

Each cell is one ``testbed.run`` of every protocol in ``--protocols`` on the same prompts, interleaved prompt by
prompt (``--interleave``: the protocols of a prompt run a fraction of a second apart, so the VM's drift falls on
all alike; ``--no-interleave``: one protocol after the other) (``--head none``: fh, sh
and auto's rounds are then lossless, so every edge protocol commits the target's greedy output and their latencies
compare like for like); the measured winner is the lowest mean ``latency_s`` per prompt (the run's summary.csv).
Two winners per cell: among the lossless protocols (the description's ``lossless``: the target's quality), and
overall (on-device included: it is lossy, its output is the drafter's).  Beside it the latency model's winner
(``testbed.simulate`` over the same prompts, rates and RTTs, the ``local`` profile on both ends, the wire format;
a chooser such as ``auto`` is not simulated, so the prediction picks among the others).  The profile is calibrated
first, in the same sitting and on the same pair (this VM's speed drifts over hours), unless ``--local-profile`` names
one.

A cell's winners are compared prompt by prompt as well as by their means: where the measured and the predicted
winner differ, the cell is a *tie* when the paired bootstrap 95% interval of their latency ratio holds 1 (the run
cannot tell them apart).  ``auto`` (a chooser) is set against the better baseline in each cell: the fastest of the
lossless protocols that do not choose (server-only and every fixed SD protocol), its latency ratio with the paired
interval.  ``--prompt-offset`` and ``--prompts-file`` run the map on other prompts (prompts no diagnosis read, kinds
no training saw; the chosen rows in ``OUT/prompts.jsonl``); ``--stream-every-tokens`` sets against it a server-only
that streams in chunks (in the cells and the prediction alike), ``--run-part-tokens`` the parts auto's handed-over
runs come in (1: every token, as server-only's default stream, so that the two send alike).  Resumable: a cell whose
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
from scripts.bench.validate_sim import calibrate_argv
from testbed.common.link import LinkSpec
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.run import RunConfig
from testbed.live.ue.ueconfig import UEConfig
from testbed.sim.cli import SimConfig
from wisv.pairs import default_prompts_file
from wisv.records.paired import paired_time_change
from wisv.tasks.jsonl import write_jsonl
from wisv.tasks.toydata import load_split
from wisv.timing.protodesc import describe

AUTO_GOAL = 1.05  # issue 58: a chooser's latency at most this times the better baseline's in every cell ...
AUTO_GAIN = 0.95  # ... and at most this in at least one


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
    interleave: bool = True  # run a cell's protocols prompt by prompt (testbed.run --interleave); else in turn
    local_profile: str | None = None  # the calibrated `local` profile the prediction uses (None: calibrate it now,
    #   on the pair, into OUT/local_profile.json, kept there for a resumed run)
    prompts_file: str | None = None  # JSONL prompt set instead of the pair's test set (testbed.run's --prompts-file:
    #   a kind no training saw, results/suite-live/prompts-unseen.jsonl)
    prompt_offset: int = field(default=0, metadata={"min": 0})  # skip this many prompts of the set first (a map on
    #   prompts no earlier diagnosis read)
    stream_every_tokens: int | None = field(default=None, metadata={"min": 1})  # server-only and on-device: a chunk
    #   of the stream ends at this many tokens, in the cells and the prediction (None: every token a chunk)
    run_part_tokens: int | None = field(default=None, metadata={"min": 1})  # auto: a run handed to the edge comes in
    #   parts of at most this many tokens (1: a token a part, as server-only streams by default; None: auto's default)


def cell_dir(cfg: CrossoverConfig, rate: float, rtt: float) -> Path:
    return Path(cfg.out) / "cells" / f"{rate:g}mbps_{rtt:g}ms"


def prompts_path(cfg: CrossoverConfig) -> Path | None:
    """The prompts file the cells and the prediction read: OUT/prompts.jsonl, the chosen rows of ``--prompts-file``
    or the pair's test set (None: no file, no offset: the pair's own set, its first ``prompts``)."""
    return Path(cfg.out) / "prompts.jsonl" if cfg.prompt_offset or cfg.prompts_file else None


def offset_rows(pair: str | None, offset: int, n: int, prompts_file: str | None = None) -> list[dict]:
    """Prompts ``[offset, offset + n)`` of ``prompts_file`` or the pair's test set, as JSONL rows ``testbed.run`` and
    ``testbed.simulate`` read as they would the set's own: a file's rows as they are; the toy split's text, already
    formatted (``raw``)."""
    src = prompts_file or default_prompts_file(pair)
    if prompts_file and not Path(prompts_file).is_file():
        raise ValueError(f"--prompts-file: no such file {prompts_file}")
    if src is None:
        rows = [{"prompt_id": p.pid, "prompt": p.prompt, "raw": True, "answer": p.answer}
                for p in load_split("test")]
    else:
        rows = [json.loads(line) for line in Path(src).read_text().splitlines() if line.strip()]
    if len(rows) < offset + n:
        where = prompts_file or f"the {pair or 'toy'} pair's test set"
        raise ValueError(f"--prompt-offset {offset} with --prompts {n}: {where} holds {len(rows)} prompts")
    return rows[offset:offset + n]


def run_cell(cfg: CrossoverConfig, rate: float, rtt: float) -> Path:
    """One testbed.run of every protocol at this link (skipped when its directory is complete)."""
    d = cell_dir(cfg, rate, rtt)
    if finished(d):
        return d
    cmd = cell_argv(cfg, rate, rtt, d)
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return d


def finished(d: Path) -> bool:
    """A testbed.run directory that ran to its end: its ``complete`` mark and its summary."""
    return (d / "complete").exists() and (d / "summary.csv").is_file()


def cell_argv(cfg: CrossoverConfig, rate: float, rtt: float, out: Path) -> list[str]:
    """testbed.run's command for one cell: a tree of K nodes, as the simulator prices it (its tree traces draft K
    tokens a round; the run's default tree budget is 16 whatever K is)."""
    pf = prompts_path(cfg)
    rc = RunConfig(protocol=",".join(cfg.protocols), prompts=cfg.prompts, out=str(out), overwrite=True,
                   reference=False, pair=cfg.pair, interleave=cfg.interleave, edge=ServeConfig(head="none"),
                   prompts_file=str(pf) if pf else None,
                   ue=UEConfig(max_new_tokens=cfg.max_new_tokens, draft_len=cfg.draft_len, tree_budget=cfg.draft_len,
                               stream_every_tokens=cfg.stream_every_tokens, run_part_tokens=cfg.run_part_tokens),
                   link=LinkSpec(rate_up_mbps=rate, rate_down_mbps=rate, rtt_ms=rtt))
    return [sys.executable, "-m", "testbed.run", *config.to_argv(rc)]


def calibrate(cfg: CrossoverConfig) -> str:
    """The `local` profile's path: ``--local-profile``, or one calibrated now on the pair (kept for a resumed run)."""
    if cfg.local_profile:
        return cfg.local_profile
    path = Path(cfg.out) / "local_profile.json"
    if not path.is_file():
        cmd = calibrate_argv(str(path), cfg.pair)
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return str(path)


def winners(latency: dict[str, float]) -> tuple[str, str]:
    """(the fastest lossless protocol, the fastest overall) of mean latencies per prompt by protocol (pure)."""
    lossless = {p: v for p, v in latency.items() if describe(p).lossless}
    return min(lossless, key=lossless.get), min(latency, key=latency.get)


def measured(d: Path) -> dict[str, float]:
    s = pd.read_csv(d / "summary.csv")
    return dict(zip(s["protocol"], s["latency_s"].astype(float)))


def prompt_times(d: Path, protocols: list[str]) -> pd.DataFrame:
    """[prompt, protocol] end-to-end seconds of a cell's run, on the prompts every protocol finished."""
    cols = {p: pd.read_json(d / p / "outputs.jsonl", lines=True).set_index("prompt_id")["t_e2e_s"] for p in protocols
            if (d / p / "outputs.jsonl").is_file()}
    return pd.DataFrame(cols).dropna()


def paired_ratio(times: pd.DataFrame, new: str, base: str) -> tuple[float, float, float]:
    """``new``'s total latency over ``base``'s on the same prompts, with its paired bootstrap 95% interval (pure)."""
    ch = paired_time_change(times[base].to_numpy(float), times[new].to_numpy(float))
    return 1 + ch["change_pct"] / 100, 1 + ch["ci_low_pct"] / 100, 1 + ch["ci_high_pct"] / 100


def tie(times: pd.DataFrame, a: str, b: str) -> bool:
    """Two different protocols the run cannot tell apart: the paired 95% interval of b's latency over a's holds 1
    (pure)."""
    if a == b or a not in times or b not in times or times.empty:
        return False
    _, lo, hi = paired_ratio(times, b, a)
    return lo <= 1 <= hi


def auto_vs_best(times: pd.DataFrame, protocols: list[str]) -> dict:
    """Each chooser against the cell's better baseline (of the lossless protocols that do not choose, the fastest by
    total latency on the shared prompts): its name, the ratio and the ratio's paired interval (pure; empty when no
    chooser or no baseline ran)."""
    base = [p for p in protocols if p in times and describe(p).lossless and not describe(p).chooses]
    out: dict = {}
    for c in (p for p in protocols if p in times and describe(p).chooses and base):
        best = min(base, key=lambda p: times[p].sum())
        r, lo, hi = paired_ratio(times, c, best)
        out |= {f"{c}_best_baseline": best, f"{c}_vs_best": r, f"{c}_vs_best_ci_low": lo, f"{c}_vs_best_ci_high": hi}
    return out


def predicted(cfg: CrossoverConfig, profile: str) -> pd.DataFrame:
    """The latency model's table on the same prompts and grid (every protocol but the choosers)."""
    out = Path(cfg.out) / "simulate"
    cmd = simulate_argv(cfg, profile, out)
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return pd.read_csv(out / "table.csv")


def simulate_argv(cfg: CrossoverConfig, profile: str, out: Path) -> list[str]:
    """testbed.simulate's command for the map's grid: the protocols that do not choose, each end's local profile."""
    pf = prompts_path(cfg)
    sim = SimConfig(out=str(out), methods=[p for p in cfg.protocols if not describe(p).chooses],
                    draft_lens=[cfg.draft_len], rates_mbps=list(cfg.rates_mbps), rtts_ms=list(cfg.rtts_ms),
                    prompts=cfg.prompts, max_new_tokens=cfg.max_new_tokens, head="none", ue_profile="local",
                    edge_profile="local", payload="wire", local_profile=profile, pair=cfg.pair,
                    prompts_file=str(pf) if pf else None, stream_every_tokens=cfg.stream_every_tokens)
    return [sys.executable, "-m", "testbed.simulate", *config.to_argv(sim)]


def cell_rows(cfg: CrossoverConfig, sim: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for rate in cfg.rates_mbps:
        for rtt in cfg.rtts_ms:
            d = cell_dir(cfg, rate, rtt)
            meas, times = measured(d), prompt_times(d, cfg.protocols)
            g = sim[(sim["rate_mbps"] == rate) & (sim["rtt_ms"] == rtt)]
            pred = dict(zip(g["protocol"], g["latency_s"].astype(float)))
            (m_ll, m_all), (p_ll, p_all) = winners(meas), winners(pred)
            rows.append({"rate_mbps": rate, "rtt_ms": rtt, "measured_lossless": m_ll, "predicted_lossless": p_ll,
                         "measured_overall": m_all, "predicted_overall": p_all,
                         "lossless_tie": tie(times, m_ll, p_ll), "overall_tie": tie(times, m_all, p_all),
                         **auto_vs_best(times, cfg.protocols),
                         **{f"measured_s_{p}": v for p, v in meas.items()},
                         **{f"predicted_s_{p}": v for p, v in pred.items()}})
    return pd.DataFrame(rows)


def agreement(cells: pd.DataFrame) -> dict:
    """Cells whose measured winner is the predicted one, and those where it is or the run cannot tell the two apart
    (``*_tie``), lossless and overall (pure)."""
    same = {k: cells[f"measured_{k}"] == cells[f"predicted_{k}"] for k in ("lossless", "overall")}
    return {"agreement": {k: int(v.sum()) for k, v in same.items()},
            "agreement_or_tie": {k: int((v | cells[f"{k}_tie"].astype(bool)).sum()) for k, v in same.items()}}


def chooser_counts(cells: pd.DataFrame, protocols: list[str]) -> dict:
    """Per chooser: cells within AUTO_GOAL of the better baseline, at most AUTO_GAIN, and its median ratio (pure)."""
    out = {}
    for c in (p for p in protocols if describe(p).chooses and f"{p}_vs_best" in cells):
        r = cells[f"{c}_vs_best"].astype(float)
        out[c] = {"within_goal": int((r <= AUTO_GOAL).sum()), "goal": AUTO_GOAL, "at_most_gain": int((r <= AUTO_GAIN)
                  .sum()), "gain": AUTO_GAIN, "median_ratio": float(r.median()), "max_ratio": float(r.max())}
    return out


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
    if cfg.local_profile and not Path(cfg.local_profile).is_file():  # not after an hour of cells
        print(f"python -m scripts.bench.crossover: error: --local-profile: no such file {cfg.local_profile}",
              file=sys.stderr)
        return 2
    pf = prompts_path(cfg)  # before anything is written: an offset past the set's end is one line, exit 2
    rows = offset_rows(cfg.pair, cfg.prompt_offset, cfg.prompts, cfg.prompts_file) if pf else []
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if pf:
        write_jsonl(pf, rows)
    config.write_config(out, cfg, config.provenance())
    t0, load0 = time.time(), os.getloadavg()
    profile = calibrate(cfg)
    for rate in cfg.rates_mbps:
        for rtt in cfg.rtts_ms:
            run_cell(cfg, rate, rtt)
    cells = cell_rows(cfg, predicted(cfg, profile))
    cells.to_csv(out / "cells.csv", index=False)
    agree = agreement(cells)
    doc = {"config": asdict(cfg) | {"local_profile": profile}, "cells": len(cells), **agree,
           "choosers": chooser_counts(cells, cfg.protocols), "wall_s": time.time() - t0,
           "load_average_start": load0, "load_average_end": os.getloadavg(),
           "predicted_from": "testbed.simulate, local profile on both ends, wire payloads; choosers not simulated"}
    (out / "crossover.json").write_text(json.dumps(doc, indent=1))
    figure(cells, out / "crossover.png", f"{cfg.pair or 'toy'} pair, {cfg.prompts} prompts x {cfg.max_new_tokens} "
                                         f"tokens, K={cfg.draft_len}; agreement {agree['agreement']}, with ties "
                                         f"{agree['agreement_or_tie']}")
    shown = [c for c in cells if c.startswith(("rate", "rtt", "measured_l", "predicted_l", "measured_o",
                                               "predicted_o", "lossless_tie")) or c.endswith(("_best_baseline",
                                                                                              "_vs_best"))]
    print(cells[shown].to_string(index=False))
    a, t = agree["agreement"], agree["agreement_or_tie"]
    print(f"agreement, measured vs predicted winner: lossless {a['lossless']}/{len(cells)} ({t['lossless']} with "
          f"ties), overall {a['overall']}/{len(cells)} ({t['overall']} with ties)")
    for c, v in doc["choosers"].items():
        print(f"{c} against the better baseline: <= {AUTO_GOAL}x in {v['within_goal']}/{len(cells)} cells, <= "
              f"{AUTO_GAIN}x in {v['at_most_gain']}, median {v['median_ratio']:.2f}x, worst {v['max_ratio']:.2f}x")
    print(f"wrote {out / 'cells.csv'}, {out / 'crossover.json'}, {out / 'crossover.png'}")
    return 0


if __name__ == "__main__":  # a cell's run that fails (a resource, a lost edge) is one line, exit 2
    rc: list[int] = []
    sys.exit(config.run_reporting("python -m scripts.bench.crossover", lambda: rc.append(main()),
                                  (ValueError, OSError, subprocess.CalledProcessError)) or rc[0])
