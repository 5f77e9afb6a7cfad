"""``python -m testbed.report RUN_DIR ...``: runs of several protocols side by side, per group of kinds.

For each run (``testbed.run --protocol greedy auto ...`` on task-suite prompts) every method against the first:
AAL, rounds per prompt and latency as % changes, fluency (both scores) and ROUGE-L against the target, and the
paired accuracy (prompts lost and gained, the delta's bootstrap 95% interval).  Reads each run's
``summary_by_group.csv`` and ``paired.csv`` (absent for prompts without answers) only; writes one CSV and prints
the table.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from config import one_line_errors
from testbed.common.files import write_csv_atomic
from wisv.records.paired import RELATIVE_COLUMNS, relative_rows

SHOWN = ["run", "link", *RELATIVE_COLUMNS]


def run_rows(run_dir: Path) -> pd.DataFrame:
    """One run's comparison rows, with the run's name and link."""
    need = run_dir / "summary_by_group.csv"
    if not need.exists():
        raise ValueError(f"{run_dir}: no {need} (a run on prompts with kinds)")
    paired = pd.read_csv(run_dir / "paired.csv") if (run_dir / "paired.csv").exists() else None  # none: no answers
    link = json.loads((run_dir / "config.json").read_text()).get("link", {}) if (run_dir / "config.json").exists() \
        else {}
    df = relative_rows(pd.read_csv(need), paired)
    return df.assign(run=run_dir.name, link=f"{link.get('rate_up_mbps')}/{link.get('rtt_ms')}" if link else "")


def main(argv: list[str] | None = None) -> None:
    ap = one_line_errors(argparse.ArgumentParser(prog="python -m testbed.report", description=__doc__.splitlines()[0]))
    ap.add_argument("runs", nargs="+", type=Path, help="run directories of testbed.run (two or more protocols)")
    ap.add_argument("--out", type=Path, default=None, help="CSV of the table (default: none, print only)")
    args = ap.parse_args(argv)
    try:
        df = pd.concat([run_rows(r) for r in args.runs], ignore_index=True)
    except ValueError as e:
        sys.exit(f"python -m testbed.report: error: {e}")
    df = df[SHOWN]
    if args.out:
        write_csv_atomic(args.out, df)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
