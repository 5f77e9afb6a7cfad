"""A chooser against the better baseline in finished ``testbed.run`` directories, one row a run (its link): each
protocol's mean latency per prompt, and each chooser (``auto``) against the better baseline (of the lossless protocols
that do not choose, the fastest on the prompts every protocol finished) and against each baseline, paired prompt by
prompt with the bootstrap 95% interval (``scripts.bench.crossover``'s rule, for runs made outside a map: a drafter
the simulator cannot trace, a dataset).  Writes ``table.csv`` in ``--out``, with the command's config beside it.

    python -m scripts.bench.chooser_table --runs runs/lookup_5 runs/lookup_20 --out results/lookup-auto/kept
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
    out: str = "runs/chooser_table"  # output directory (table.csv, config.toml)


def run_row(d: Path) -> dict:
    """One run's row (pure on its files): the link, the mean latency by protocol, each chooser against the better
    baseline and against each baseline."""
    try:
        meas = measured(d)
    except (KeyError, ValueError):
        raise ValueError(f"run {d}: summary.csv holds no protocol and latency_s columns") from None
    protocols = list(meas)
    lost = [p for p in protocols if not (d / p / "outputs.jsonl").is_file()]
    if lost:
        raise ValueError(f"run {d}: no {lost[0]}/outputs.jsonl (its summary names {lost[0]})")
    times = prompt_times(d, protocols)
    cfg = d / "config.toml"
    link = tomllib.loads(cfg.read_text()).get("link", {}) if cfg.is_file() else {}
    row = {"run": d.name, "rate_mbps": link.get("rate_up_mbps"), "rtt_ms": link.get("rtt_ms"), "prompts": len(times),
           **{f"latency_s_{p}": v for p, v in meas.items()}, **auto_vs_best(times, protocols)}
    for c in (p for p in protocols if describe(p).chooses):
        for b in (p for p in protocols if describe(p).lossless and not describe(p).chooses):
            r, lo, hi = paired_ratio(times, c, b)
            row |= {f"{c}_vs_{b}": r, f"{c}_vs_{b}_ci_low": lo, f"{c}_vs_{b}_ci_high": hi}
    return row


def main(argv: list[str] | None = None) -> int:
    cfg = config.parse(ChooserTableConfig, argv, prog="python -m scripts.bench.chooser_table", description=__doc__)
    missing = [r for r in cfg.runs if not finished(Path(r))]
    if not cfg.runs or missing:
        why = f"not a finished testbed.run directory (no summary.csv, or no complete mark): {missing[0]}" if missing \
            else "none given"
        print(f"python -m scripts.bench.chooser_table: error: runs: {why}", file=sys.stderr)
        return 2
    table = pd.DataFrame([run_row(Path(r)) for r in cfg.runs])
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
