"""Stage (anatomy): where the answer flips of labelled mismatches fall, so that a guard can be aimed at them.

A flip is a mismatch whose acceptance alone (the target greedy after it) turns a right answer wrong (labels.csv
``turns_wrong``); a gain turns a wrong one right.  Each checkable mismatch is placed by its prompt's part (dev kinds
or the rest), its answer form (answer first or last), whether the output's first sentence was already complete
before it (an answer-first reply states its answer there), and whether the sure-target guard rejects it anyway.
Each cell reports its flips, gains and the one-sided Clopper-Pearson bound on its flip rate (labeling.risk): the rate
a judge accepting every mismatch of that cell could be held to on this data.  Writes anatomy.csv (the cells) and
anatomy_kinds.csv (the same per kind), with the config.  The table functions are pure.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from labeling.config import AnatomyConfig
from labeling.risk import flip_upper_bound
from labeling.store import EPISODES, load_config, load_labelled, require, save_config
from wisv.head.features import SCALARS, EdgeFeatures, with_out_pos
from wisv.head.guard import GuardConfig, sure_target
from wisv.tasks.jsonl import read_jsonl

_SENTENCE_END = re.compile(r"[.!?](\s|$)|\n")  # a sentence ends here: . ! ? before a space or the end, or a newline
CELL = ["part", "form", "place", "guarded"]  # what anatomy.csv groups by


def first_sentence_done(prefix: str) -> bool:
    """Whether an output that starts with ``prefix`` has finished its first sentence (any text after it)."""
    return bool(_SENTENCE_END.search(prefix.lstrip()))


def place_of(prefix: str) -> str:
    """Where a mismatch falls in its output: "first sentence" or "after"."""
    return "after" if first_sentence_done(prefix) else "first sentence"


def flip_table(rows: pd.DataFrame, by: list[str], delta: float) -> pd.DataFrame:
    """Per group of the checkable rows: n, flips, gains, the flip rate and its upper (1 - delta) bound."""
    rows = rows[rows["checkable"]]
    g = rows.groupby(by, dropna=False).agg(n=("turns_wrong", "size"), flips=("turns_wrong", "sum"),
                                           gains=("turns_right", "sum")).reset_index()
    g["flip_rate"] = g["flips"] / g["n"]
    g["flip_bound"] = [flip_upper_bound(int(f), int(n), delta) for f, n in zip(g["flips"], g["n"])]
    return g


def run_rows(run_dir: str, dev_kinds: tuple[str, ...], guard: GuardConfig, decode) -> pd.DataFrame:
    """One row per labelled mismatch of a run directory: its cell and labels."""
    lab, tr = load_labelled(run_dir)
    episodes = read_jsonl(require(run_dir, EPISODES, "collect"))
    rows = lab.index.to_numpy()
    edge = with_out_pos(tr["edge"][rows].astype(np.float32), tr["position"][rows])
    guarded = sure_target(EdgeFeatures(torch.from_numpy(edge[:, :len(SCALARS)]), torch.zeros(len(rows), 0)), guard)
    eps = [episodes[int(e)] for e in lab["episode"]]
    return pd.DataFrame({
        "run_dir": run_dir, "episode": lab["episode"], "position": lab["position"],
        "kind": [str(e.get("kind", "")) for e in eps], "form": [str(e.get("form") or "-") for e in eps],
        "part": ["dev" if str(e.get("kind", "")) in dev_kinds else "train" for e in eps],
        "place": [place_of(decode(e["output_ids"][:int(p)])) for e, p in zip(eps, lab["position"])],
        "guarded": guarded.numpy(), "checkable": [e.get("answer") is not None for e in eps],
        "turns_wrong": lab["turns_wrong"].astype(int), "turns_right": lab["turns_right"].astype(int)})


def tokenizer_of(run_dir: str):
    """The tokenizer of the target a run directory was collected with (the built-in pair's if none is named)."""
    from wisv.models.loader import builtin_paths, load_tokenizer
    target = load_config(run_dir, "collect").get("target") or builtin_paths()[1]
    tok = load_tokenizer(Path(target), "target")
    if tok is None:
        raise ValueError(f"{run_dir}: the target {target} has no tokenizer to read its outputs with")
    return tok


def run(cfg: AnatomyConfig) -> dict:
    guard = GuardConfig(top1_min=cfg.guard_top1_min, nll_margin_min_nats=cfg.guard_margin_nats)
    parts = []
    for run_dir in cfg.run_dirs:
        parts.append(run_rows(run_dir, tuple(cfg.dev_kinds), guard, tokenizer_of(run_dir).decode))
        print(f"{run_dir}: {len(parts[-1])} labelled mismatches")
    rows = pd.concat(parts, ignore_index=True)
    cells = flip_table(rows, CELL, cfg.delta)
    kinds = flip_table(rows, ["part", "kind", "form", "place", "guarded"], cfg.delta)
    out = Path(cfg.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    cells.to_csv(out / "anatomy.csv", index=False)
    kinds.to_csv(out / "anatomy_kinds.csv", index=False)
    save_config(out, "anatomy", cfg)
    with pd.option_context("display.width", 160, "display.max_rows", 200):
        print(cells.round(4).to_string(index=False))
    print(f"wrote {out / 'anatomy.csv'} and {out / 'anatomy_kinds.csv'}")
    return {"cells": cells, "kinds": kinds}
