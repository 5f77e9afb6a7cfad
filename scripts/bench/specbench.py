"""Spec-Bench's table over the emulated good link: every method on Spec-Bench's six tasks, one live run a cell.

Usage: ``python -m scripts.bench.specbench [--pair smollm2] [--categories summarization rag]
[--prompts-per-category 5] [--max-new-tokens 128] [--methods server greedy ngram] [--out runs/specbench]``
(``make specbench``).

Each (method, category) cell is one ``python -m testbed.run`` on ``--dataset spec-bench:CATEGORY``'s first
``--prompts-per-category`` questions (MT-Bench: its eight categories taken in turn, two turns each) over the link
given (by default the good link, 200 Mbit/s and 5 ms), into ``OUT/cells/METHOD/CATEGORY``.  A cell whose directory holds
testbed.run's ``complete`` marker is skipped, so a killed bench goes on where it stopped.  Methods (``METHODS``):
server-only, on-device, greedy SD with the pair's distilled drafter, the feature head, prompt lookup on the device,
tree, auto, server-only with the edge's own drafts (``--edge-draft ngram|suffix``), and the two sources together
(issue 59, docs/suffix-drafting.md): auto handing rounds to an edge that drafts by suffix, and greedy SD (the
distilled drafter or prompt lookup) whose draft the edge extends with its suffix continuation.  The aggregation reads
wisv/records/fieldmetrics.py: Spec-Bench's speed-up over server-only on the same prompts, the mean accepted tokens
(bonus counted), vLLM's per-position acceptance, each output's agreement with server-only's (the target's greedy
output).  Writes ``cells.csv`` (a row per cell), ``table.csv`` and ``table.md`` (Spec-Bench's layout),
``positions.csv``, ``specbench.png`` and ``bench.json`` (the config, the machine and its load) under ``--out``.
The other links (``--sim-links``: the poor link, the replay of T-Mobile's LTE trace) are simulated from the live
cells, each prompt re-timed under them (scripts/bench/speclinks.py), a section each in the table.
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
from channel.csi import CSI
from scripts.bench.speclinks import SIM_LINK_NAMES, retimed, sim_links
from testbed.common.machine import machine_info
from wisv.records.fieldmetrics import per_position_acceptance, prompt_speeds, task_markdown, task_table
from wisv.tasks.datasets import MT_BENCH_CATEGORIES, SPEC_BENCH_TASKS, task_of

PROG = "python -m scripts.bench.specbench"
CATEGORIES = {"mt-bench": MT_BENCH_CATEGORIES, "translation": ("translation",), "summarization": ("summarization",),
              "qa": ("qa",), "math_reasoning": ("math_reasoning",), "rag": ("rag",)}  # a cell each: its categories
METHODS = {  # method -> testbed.run flags (the pair's drafter unless they name another)
    "server": ["--protocol", "server"],
    "device": ["--protocol", "device"],
    "greedy": ["--protocol", "greedy"],
    "feature-head": ["--protocol", "greedy", "--drafter-head", "wisv/assets/smollm2-feature-head", "--head", "none"],
    "ngram": ["--protocol", "greedy", "--drafter", "ngram"],
    "tree": ["--protocol", "tree"],
    "auto": ["--protocol", "auto"],
    "server+ngram": ["--protocol", "server", "--edge-draft", "ngram"],  # the edge drafts for its own streams
    "server+suffix": ["--protocol", "server", "--edge-draft", "suffix"],  # (docs/suffix-drafting.md)
    "auto+suffix": ["--protocol", "auto", "--edge-draft", "suffix"],  # a handed-over round verifies suffix drafts
    "greedy+suffix": ["--protocol", "greedy", "--edge-draft", "suffix"],  # the edge extends the device's draft
    "ngram+suffix": ["--protocol", "greedy", "--drafter", "ngram", "--edge-draft", "suffix"],  # the same, lookup
}
BASELINE = "server"


@dataclass
class BenchConfig:
    """One Spec-Bench table run (bench.json keeps it)."""

    pair: str | None = None  # named pair (testbed.run --pair); None: the built-in toy pair
    categories: list[str] = field(default_factory=lambda: list(CATEGORIES), metadata={
        "choices": tuple(CATEGORIES)})  # Spec-Bench's tasks to run, by category (mt-bench: its eight)
    methods: list[str] = field(default_factory=lambda: list(METHODS), metadata={
        "choices": tuple(METHODS)})  # methods to run (server, the baseline, always runs)
    prompts_per_category: int = field(default=5, metadata={"min": 1})  # first N questions of each category
    max_new_tokens: int = field(default=128, metadata={"min": 1})  # generation budget per prompt, tokens
    draft_len: int = field(default=8, metadata={"min": 1})  # K of the speculative methods, tokens
    rate_mbps: float = field(default=200.0, metadata={"min": 0})  # the emulated link's rate each way, Mbit/s
    rtt_ms: float = field(default=5.0, metadata={"min": 0})  # the emulated link's round-trip time, ms
    sim_links: list[str] = field(default_factory=lambda: list(SIM_LINK_NAMES), metadata={
        "choices": SIM_LINK_NAMES})  # links the live cells are re-timed under (scripts/bench/speclinks.py)
    out: str = "runs/specbench"  # output directory (cells/METHOD/CATEGORY: one testbed.run each)


@dataclass(frozen=True)
class Cell:
    """One (method, category) live run."""

    method: str  # a METHODS key
    category: str  # a CATEGORIES key

    def dir(self, out: Path) -> Path:
        return out / "cells" / self.method / self.category


def plan(cfg: BenchConfig) -> list[Cell]:
    """Every cell, category by category, server-only first in each (the baseline runs even when not asked for)."""
    methods = [BASELINE] + [m for m in cfg.methods if m != BASELINE]
    return [Cell(m, c) for c in cfg.categories for m in methods]


def todo(cells: list[Cell], out: Path) -> list[Cell]:
    """The cells not yet complete (testbed.run writes ``complete`` last)."""
    return [c for c in cells if not (c.dir(out) / "complete").is_file()]


def cell_argv(cell: Cell, cfg: BenchConfig, out: Path) -> list[str]:
    """testbed.run's argv for a cell (an unfinished directory is overwritten)."""
    pair = ["--pair", cfg.pair] if cfg.pair else []
    return [*METHODS[cell.method], *pair, "--dataset", "spec-bench:" + ",".join(CATEGORIES[cell.category]),
            "--prompts", str(cfg.prompts_per_category), "--max-new-tokens", str(cfg.max_new_tokens),
            "--draft-len", str(cfg.draft_len), "--rate-mbps", str(cfg.rate_mbps), "--rtt-ms", str(cfg.rtt_ms),
            "--no-reference", "--out", str(cell.dir(out)), "--overwrite"]


def read_cell(d: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(outputs, rounds, prompts) of a complete cell's run directory (its one protocol's)."""
    proto = next(p.parent for p in d.glob("*/outputs.jsonl"))
    outputs = pd.read_json(proto / "outputs.jsonl", lines=True, dtype={"prompt_id": str})
    rounds = pd.read_csv(proto / "rounds.csv") if (proto / "rounds.csv").stat().st_size else pd.DataFrame()
    prompts = pd.read_json(d / "prompts.jsonl", lines=True, dtype={"prompt_id": str, "question_id": str})
    return outputs, rounds, prompts


def aggregate(data: dict[Cell, tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]], link: str = "good (live)"
              ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(Spec-Bench's task table, a row per cell, per-position acceptance per method over every task and on each)
    from the cells' outputs, rounds and prompts; speed-ups against server-only on the same prompts, agreement with
    its outputs."""
    methods = list(dict.fromkeys(c.method for c in data))
    runs, rows, pos, prompts = {}, [], [], []
    for m in methods:
        cells = [c for c in data if c.method == m]
        outs = pd.concat([data[c][0] for c in cells], ignore_index=True)
        rounds = pd.concat([data[c][1] for c in cells], ignore_index=True)
        runs[m] = (prompt_speeds(outs), rounds)
        pos.append(per_position_acceptance(rounds).assign(method=m, task="all"))
        for c in cells:  # and on each task alone (a cell is one task)
            pos.append(per_position_acceptance(data[c][1]).assign(method=m, task=task_of(CATEGORIES[c.category][0])))
    for c, (outs, rounds, ps) in data.items():
        base = data.get(Cell(BASELINE, c.category))
        prompts.append(ps.assign(task=ps["category"].map(task_of)))
        rows.append(cell_row(c, outs, rounds, base[0] if base else None) | {"link": link})
    ps = pd.concat(prompts).drop_duplicates("prompt_id")
    table = task_table(runs, ps, BASELINE, tuple(SPEC_BENCH_TASKS))
    return table, pd.DataFrame(rows), pd.concat(pos, ignore_index=True)


def cell_row(c: Cell, outs: pd.DataFrame, rounds: pd.DataFrame, base: pd.DataFrame | None) -> dict:
    """One cell's row of cells.csv: its speed, bytes, acceptance and agreement with server-only's outputs."""
    sp = prompt_speeds(outs)
    tokens = int(sp["n_tokens"].sum())
    same = None
    if base is not None:
        ref = dict(zip(base["prompt_id"].astype(str), base["tokens"].map(list)))
        same = float(outs.apply(lambda r: ref.get(str(r["prompt_id"])) == list(r["tokens"]), axis=1).mean())
    up = float(rounds["uplink_bytes"].sum()) if "uplink_bytes" in rounds else 0.0
    down = float(rounds["downlink_bytes"].sum()) if "downlink_bytes" in rounds else 0.0
    return {"method": c.method, "category": c.category, "task": task_of(CATEGORIES[c.category][0]),
            "prompts": len(sp), "tokens": tokens,
            "tok_s": tokens / float(sp["latency_s"].sum()) if len(sp) else float("nan"),
            "uplink_bytes_per_token": up / tokens if tokens else float("nan"),
            "downlink_bytes_per_token": down / tokens if tokens else float("nan"),
            "matches_server": same, "errors": int(outs["error"].notna().sum()) if "error" in outs else 0}


def plot(tables: dict[str, pd.DataFrame], path: Path, title: str) -> Path:
    """Speed-up over server-only per task and method (bars), a panel per link, the machine's load in the title."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(tables), 1, figsize=(10, 3.6 * len(tables)), squeeze=False)
    for ax, (link, table) in zip(axes[:, 0], tables.items()):
        speeds = table.drop(columns=[c for c in table.columns if c.startswith("#")])
        speeds.T.plot.bar(ax=ax, rot=12, legend=ax is axes[0, 0])
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_ylabel("speed-up over server-only")
        ax.set_title(link, fontsize=9)
    fig.suptitle(title, fontsize=9)
    plt.tight_layout()
    plt.savefig(path, dpi=120)
    plt.close("all")
    return path


def run(cfg: BenchConfig) -> pd.DataFrame:
    """Run the cells not yet complete, aggregate every cell on the live link and re-timed under each simulated one;
    the live link's task table."""
    out = Path(cfg.out)
    cells = plan(cfg)
    loads = {"load_before": os.getloadavg()}
    for i, c in enumerate(todo(cells, out)):
        print(f"[{i + 1}] {c.method} / {c.category}", flush=True)
        c.dir(out).parent.mkdir(parents=True, exist_ok=True)
        log = c.dir(out).parent / f"{c.category}.log"
        with log.open("w") as f:
            rc = subprocess.call([sys.executable, "-m", "testbed.run", *cell_argv(c, cfg, out)], stdout=f,
                                 stderr=subprocess.STDOUT)
        if rc:
            print(f"  failed (exit {rc}): see {log}", flush=True)
    loads["load_after"] = os.getloadavg()
    done = [c for c in cells if c not in todo(cells, out)]
    if not any(c.method == BASELINE for c in done):
        raise ValueError(f"no server-only cell completed: nothing to measure speed-ups against (see {out}/cells)")
    data = {c: read_cell(c.dir(out)) for c in done}
    live = f"good {cfg.rate_mbps:g} Mbit/s, {cfg.rtt_ms:g} ms (live)"
    table, rows, pos = aggregate(data, live)
    tables, all_rows = {live: table}, [rows]
    live_csi = CSI(cfg.rate_mbps or float("inf"), cfg.rate_mbps or float("inf"), cfg.rtt_ms)
    for name in cfg.sim_links:
        link = sim_links()[name]
        moved = {c: (retimed(o, r, p, live_csi, link), r, p) for c, (o, r, p) in data.items()}
        tables[link.label], sim_rows, _ = aggregate(moved, link.label)
        all_rows.append(sim_rows)
    write(out, cfg, tables, pd.concat(all_rows, ignore_index=True), pos, loads, [c for c in cells if c not in done])
    return table


def write(out: Path, cfg: BenchConfig, tables: dict[str, pd.DataFrame], rows: pd.DataFrame, pos: pd.DataFrame,
          loads: dict, missing: list[Cell]) -> None:
    """The bench's files: tables (a section per link), figure, and its config with the machine and its load."""
    pd.concat([t.assign(link=k) for k, t in tables.items()]).to_csv(out / "table.csv")
    rows.to_csv(out / "cells.csv", index=False)
    pos.to_csv(out / "positions.csv", index=False)
    not_run = [f"{c.method}/{c.category} (failed)" for c in missing]
    md = "\n\n".join(f"**{k}**\n\n{task_markdown(t)}" for k, t in tables.items())
    md += f"\n\nnot run: {', '.join(not_run) or 'none'}; simulated links keep the live rounds' decisions\n"
    (out / "table.md").write_text(md)
    load = ", ".join(f"{k} {v[0]:.2f}" for k, v in loads.items())
    plot(tables, out / "specbench.png", f"Spec-Bench tasks, {cfg.pair or 'toy'} pair; load avg {load}")
    (out / "bench.json").write_text(json.dumps({"config": asdict(cfg), "machine": machine_info(), "loads": loads,
                                                "not_run": not_run, "command": " ".join(sys.argv)}, indent=1))
    print(md, flush=True)


def main(argv: list[str] | None = None) -> None:
    cfg = config.parse(BenchConfig, argv, prog=PROG, description=__doc__.splitlines()[0])
    try:
        run(cfg)
    except ValueError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"results in {cfg.out}")


if __name__ == "__main__":
    main()
