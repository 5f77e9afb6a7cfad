"""A chooser against the better baseline in finished ``testbed.run`` directories, one row a run (its link): each
protocol's mean latency per prompt, and each chooser (``auto``) against the better baseline (of the lossless protocols
that do not choose, the fastest on the prompts every protocol finished) and against each baseline, paired prompt by
prompt with the bootstrap 95% interval (``scripts.bench.crossover``'s rule, for runs made outside a map: a drafter
the simulator cannot trace, a dataset).  Writes ``table.csv`` in ``--out``, with the command's config beside it.

    python -m scripts.bench.chooser_table --runs runs/lookup_5 runs/lookup_20 --out results/lookup-auto/kept

With ``--pool``, one row over all the runs' prompts together: one link's cell measured in several runs on disjoint
prompts (each ratio still paired prompt by prompt; the runs' own speeds differ, and the better baseline is the faster
over the whole pool).
"""
from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

import config
from scripts.bench.crossover import auto_vs_best, finished, measured, paired_ratio, prompt_times
from wisv.timing.protodesc import describe


@dataclass
class ChooserTableConfig:
    """The runs to read and where the table goes."""

    runs: list[str] = field(default_factory=list)  # testbed.run output directories, one row each
    pool: bool = False  # one row over every run's prompts together instead (the same link and protocols in each,
    #   no prompt in two: one cell measured on more prompts, in several sittings; each ratio stays paired per prompt)
    out: str = "runs/chooser_table"  # output directory (table.csv, config.toml)


def link_of(d: Path) -> dict:
    """The run's emulated link as its config.toml records it (empty without one)."""
    cfg = d / "config.toml"
    return tomllib.loads(cfg.read_text()).get("link", {}) if cfg.is_file() else {}


def run_times(d: Path) -> tuple[dict[str, float], pd.DataFrame]:
    """The run's mean latency by protocol (its summary) and its [prompt, protocol] seconds; a ValueError naming what
    is missing."""
    try:
        meas = measured(d)
    except (KeyError, ValueError):
        raise ValueError(f"run {d}: summary.csv holds no protocol and latency_s columns") from None
    protocols = list(meas)
    lost = [p for p in protocols if not (d / p / "outputs.jsonl").is_file()]
    if lost:
        raise ValueError(f"run {d}: no {lost[0]}/outputs.jsonl (its summary names {lost[0]})")
    return meas, prompt_times(d, protocols)


def comparisons(times: pd.DataFrame, protocols: list[str]) -> dict:
    """Each chooser against the better baseline and against each baseline, paired per prompt (pure)."""
    row = auto_vs_best(times, protocols)
    for c in (p for p in protocols if describe(p).chooses):
        for b in (p for p in protocols if describe(p).lossless and not describe(p).chooses):
            r, lo, hi = paired_ratio(times, c, b)
            row |= {f"{c}_vs_{b}": r, f"{c}_vs_{b}_ci_low": lo, f"{c}_vs_{b}_ci_high": hi}
    return row


def run_row(d: Path) -> dict:
    """One run's row (pure on its files): the link, the mean latency by protocol, each chooser against the better
    baseline and against each baseline."""
    meas, times = run_times(d)
    link = link_of(d)
    return {"run": d.name, "rate_mbps": link.get("rate_up_mbps"), "rtt_ms": link.get("rtt_ms"), "prompts": len(times),
            **{f"latency_s_{p}": v for p, v in meas.items()}, **comparisons(times, list(meas))}


def pooled_row(dirs: list[Path]) -> dict:
    """One row over the runs' prompts together (pure on their files): each protocol's mean latency on them, and the
    comparisons, still paired per prompt.  A ValueError where a run's link or protocols differ from the first's, or a
    prompt is in two runs."""
    (meas, first), link = run_times(dirs[0]), link_of(dirs[0])
    protocols, parts = list(meas), [first]
    for d in dirs[1:]:
        other, times = run_times(d)
        if list(other) != protocols or link_of(d) != link:
            raise ValueError(f"--pool: run {d} has other protocols or another link than {dirs[0]}")
        parts.append(times)
    times = pd.concat(parts)
    twice = times.index[times.index.duplicated()]
    if len(twice):
        raise ValueError(f"--pool: prompt {twice[0]} is in two runs")
    return {"run": "+".join(d.name for d in dirs), "rate_mbps": link.get("rate_up_mbps"), "rtt_ms": link.get("rtt_ms"),
            "prompts": len(times), **{f"latency_s_{p}": float(times[p].mean()) for p in protocols},
            **comparisons(times, protocols)}


def main(argv: list[str] | None = None) -> int:
    cfg = config.parse(ChooserTableConfig, argv, prog="python -m scripts.bench.chooser_table", description=__doc__)
    missing = [r for r in cfg.runs if not finished(Path(r))]
    if not cfg.runs or missing:
        why = f"not a finished testbed.run directory (no summary.csv, or no complete mark): {missing[0]}" if missing \
            else "none given"
        print(f"python -m scripts.bench.chooser_table: error: runs: {why}", file=sys.stderr)
        return 2
    dirs = [Path(r) for r in cfg.runs]
    table = pd.DataFrame([pooled_row(dirs)] if cfg.pool else [run_row(d) for d in dirs])
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "table.csv", index=False)
    config.write_config(out, cfg, config.provenance())
    print(table.to_string(index=False))
    print(f"wrote {out / 'table.csv'}")
    return 0


if __name__ == "__main__":  # a run's files that do not read (a protocol's outputs missing): one line, exit 2
    rc: list[int] = []
    sys.exit(config.run_reporting("python -m scripts.bench.chooser_table", lambda: rc.append(main()),
                                  (ValueError, OSError)) or rc[0])
