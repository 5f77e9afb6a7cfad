"""Time the label stage's two engines on the same mismatches: ``python -m scripts.bench.label --run-dir RUN``.

RUN holds collect's output (traces.npz, episodes.jsonl, config_collect.json).  The first ``--limit`` mismatches
(trace order) are forced and labelled by the batched engine (last round's path: prompt + prefix re-prefilled per
mismatch) and by the cached one (each episode's KV cache reused), interleaved: batched, cached, batched, cached,
... ``--repeats`` times each.  Writes JSON (``--out``; default RUN/bench_label.json): the seconds of every run,
the median of each engine, their ratio, and whether the first runs of the two agree: label columns equal, rows
whose continuations differ (a near-tie flips a greedy token) and the largest relative NLL and ratio differences.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pandas as pd

import config
from labeling.config import LabelConfig
from labeling.label import Inputs, force, label_row, load_inputs

EXACT = ("episode", "position", "draft_id", "settled", "outcome_forced", "turns_wrong", "turns_right", "disfluent",
         "harmful", "helpful", "changed")  # label columns that must be equal
CLOSE = ("nll_draft", "nll_target", "ppl_ratio")  # float columns compared by relative difference


@dataclass
class BenchLabelConfig:
    """One timing of the label engines (written into the JSON)."""

    run_dir: str = "runs/labeling"  # run directory with collect's output
    limit: int = field(default=200, metadata={"min": 1})  # mismatches timed: the first N in trace order
    repeats: int = field(default=2, metadata={"min": 1})  # timed runs per engine, interleaved
    batch: int = field(default=32, metadata={"min": 1})  # continuations generated together (both engines)
    threads: int = field(default=2, metadata={"min": 1})  # torch threads
    out: str | None = None  # JSON path (None: RUN_DIR/bench_label.json)


def timed(inp: Inputs, tr: dict, cfg: LabelConfig) -> tuple[float, pd.DataFrame, dict[int, list[int]]]:
    """Seconds to force and label the mismatches of ``tr`` (the stage's work after loading), the label rows and
    each row's continuation."""
    tok, t0 = inp.pair.tokenizer, time.perf_counter()
    order, short, forced = force(inp.pair.target, tok, inp.episodes, tr, inp.budget, cfg, inp.settled)
    rows = [label_row(tok, inp.episodes, tr, i, f, inp.checker, inp.budget, cfg, short[i]) for i, f in
            zip(order, forced)]
    df = pd.DataFrame(rows).sort_values("row", ignore_index=True)
    return time.perf_counter() - t0, df, {i: f.cont for i, f in zip(order, forced)}


def agreement(a: pd.DataFrame, b: pd.DataFrame, ca: dict[int, list[int]], cb: dict[int, list[int]],
              window: int) -> dict:
    """How two engines' first runs agree: rows with another label, rows whose continuations differ (over the
    shorter one: the batched engine may generate past a row's steps), within the ratio's window, and the largest
    relative differences of the float columns."""
    diff_rows = [int(r) for r, x, y in zip(a["row"], a[list(EXACT)].values, b[list(EXACT)].values)
                 if list(x) != list(y)]
    cont_rows = [i for i in ca if ca[i][:len(cb[i])] != cb[i][:len(ca[i])]]
    win_rows = [i for i in cont_rows if ca[i][:window] != cb[i][:window]]
    rel = {c: float(((a[c] - b[c]).abs() / b[c].abs().clip(lower=1e-12)).max()) for c in CLOSE}
    return {"labels_agree": not diff_rows, "rows_with_other_labels": diff_rows,
            "rows_with_other_continuations": cont_rows, "rows_with_other_window_tokens": win_rows,
            "max_rel_diff": rel}


def main(argv: list[str] | None = None) -> int:
    ap = config.one_line_errors(argparse.ArgumentParser(prog="python -m scripts.bench.label", description=__doc__))
    bc = config.parse(BenchLabelConfig, argv, config.add_flags(ap, BenchLabelConfig))
    lcfg = LabelConfig(run_dir=bc.run_dir, batch=bc.batch, threads=bc.threads)
    inp = load_inputs(lcfg)
    tr = {k: v[:bc.limit] for k, v in inp.traces.items()}
    secs: dict[str, list[float]] = {"batched": [], "cached": []}
    first: dict[str, tuple[pd.DataFrame, dict]] = {}
    for _ in range(bc.repeats):
        for engine in secs:
            s, df, conts = timed(inp, tr, replace(lcfg, engine=engine))
            secs[engine].append(s)
            first.setdefault(engine, (df, conts))
            print(f"{engine}: {s:.1f} s for {len(df)} mismatches", file=sys.stderr)
    med = {e: statistics.median(v) for e, v in secs.items()}
    (c_df, c_conts), (b_df, b_conts) = first["cached"], first["batched"]
    res = {"config": asdict(bc), "mismatches": len(tr["episode"]), "episodes": len(set(tr["episode"].tolist())),
           "seconds": secs, "median_s": med, "speedup": med["batched"] / med["cached"],
           **agreement(c_df, b_df, c_conts, b_conts, max(1, lcfg.fluency_window - 1)),
           "provenance": config.provenance()}
    out = Path(bc.out or Path(bc.run_dir) / "bench_label.json")
    out.write_text(json.dumps(res, indent=1))
    print(json.dumps({k: res[k] for k in ("mismatches", "median_s", "speedup", "labels_agree")}))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
