"""``python -m testbed.report RUN_DIR ...``: runs of several protocols side by side, per group of kinds.

For each run (``testbed.run --protocol greedy auto ...`` on task-suite prompts) every method against the first:
AAL, rounds per prompt and latency as % changes, fluency (both scores) and ROUGE-L against the target, and the
paired accuracy (prompts lost and gained, the delta's bootstrap 95% interval).  Reads each run's
``summary_by_group.csv`` and ``paired.csv`` (absent for prompts without answers) only; writes one CSV and prints
the table.

``--against BASE_RUN``: instead, each run against BASE_RUN protocol by protocol, prompt by prompt (two drafters,
say, on the same prompts and link): identical outputs, AAL, rounds and latency changes with the latter's paired
interval (``wisv.records.paired.run_vs_run``, from each protocol's ``outputs.jsonl``).

``--by-prompt``: within each run, every protocol against the run's first (``--protocol greedy auto``: auto against
greedy), prompt by prompt in the same way: the latency change with its paired interval, and the prompts faster and
slower, which the group table above gives as a change of means only.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from config import one_line_errors
from testbed.common.files import write_csv_atomic
from wisv.records.paired import RELATIVE_COLUMNS, RUN_VS_RUN_COLUMNS, relative_rows, run_vs_run

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


def outputs(run_dir: Path, proto: str) -> pd.DataFrame | None:
    """One protocol's per-prompt rows in a run (its outputs.jsonl), or None where it has none."""
    path = run_dir / proto / "outputs.jsonl"
    return pd.read_json(path, lines=True) if path.is_file() else None


def against_rows(base_dir: Path, run_dir: Path) -> pd.DataFrame:
    """``run_dir`` against ``base_dir``, one row per protocol both ran (their outputs.jsonl, paired by prompt)."""
    rows = []
    for proto in sorted(d.name for d in run_dir.iterdir() if (d / "outputs.jsonl").is_file()):
        base = outputs(base_dir, proto)
        if base is None:
            continue
        new = outputs(run_dir, proto)
        rows.append({"run": run_dir.name, "against": base_dir.name, "protocol": proto, **run_vs_run(base, new)})
    if not rows:
        raise ValueError(f"{run_dir} and {base_dir} share no protocol with an outputs.jsonl")
    return pd.DataFrame(rows)[["run", "against", *RUN_VS_RUN_COLUMNS]]


def by_prompt_rows(run_dir: Path) -> pd.DataFrame:
    """Each protocol of one run against its first, one row each (their outputs.jsonl, paired by prompt)."""
    if not (run_dir / "config.json").is_file():
        raise ValueError(f"{run_dir}: no config.json (a testbed.run directory)")
    order = json.loads((run_dir / "config.json").read_text())["protocol"].split(",")
    found = {p: df for p in order if (df := outputs(run_dir, p)) is not None}
    protos = list(found)
    if len(protos) < 2:
        raise ValueError(f"{run_dir}: fewer than two protocols with an outputs.jsonl ({', '.join(protos) or 'none'})")
    return pd.DataFrame([{"run": run_dir.name, "against": protos[0], "protocol": p,
                          **run_vs_run(found[protos[0]], found[p])}
                         for p in protos[1:]])[["run", "against", *RUN_VS_RUN_COLUMNS]]


def rows_of(args: argparse.Namespace) -> pd.DataFrame:
    """The table that the flags ask for."""
    if args.against:
        return pd.concat([against_rows(args.against, r) for r in args.runs], ignore_index=True)
    if args.by_prompt:
        return pd.concat([by_prompt_rows(r) for r in args.runs], ignore_index=True)
    return pd.concat([run_rows(r)[SHOWN] for r in args.runs], ignore_index=True)


def main(argv: list[str] | None = None) -> None:
    ap = one_line_errors(argparse.ArgumentParser(prog="python -m testbed.report", description=__doc__.splitlines()[0]))
    ap.add_argument("runs", nargs="+", type=Path, help="run directories of testbed.run (two or more protocols)")
    ap.add_argument("--out", type=Path, default=None, help="CSV of the table (default: none, print only)")
    ap.add_argument("--against", type=Path, default=None,
                    help="a base run: each run against it, same protocol, prompt by prompt (default: none)")
    ap.add_argument("--by-prompt", action="store_true",
                    help="within each run, every protocol against its first, prompt by prompt: the latency change "
                         "with its paired bootstrap 95%% interval, prompts faster and slower (default: off)")
    args = ap.parse_args(argv)
    if args.against and args.by_prompt:
        ap.error("--against and --by-prompt are two different tables: give one")
    try:
        df = rows_of(args)
    except (ValueError, OSError) as e:
        sys.exit(f"python -m testbed.report: error: {e}")
    if args.out:
        write_csv_atomic(args.out, df)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
