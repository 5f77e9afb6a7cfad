"""Run-directory layout of the labeling pipeline: file names, stage configs and the trace arrays."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

import config
from config.provenance import provenance

TRACES = "traces.npz"  # one row per mismatch: ids, positions, h_d, h_t (collect)
EPISODES = "episodes.jsonl"  # one row per prompt: ids, output, outcome (collect)
LABELS = "labels.csv"  # one row per mismatch: base label y (label)
INSTANCES = "instances_{variant}.npz"  # training instances (relabel): variant "csi" or "nocsi"
HEADS = "heads/{variant}"  # trained heads (train)
EVAL_CSV = "evaluate.csv"  # one row per (variant, channel, tau) (evaluate)


def stage_path(run_dir: str | Path, name: str, **fmt: str) -> Path:
    """Path of one pipeline file inside the run directory."""
    return Path(run_dir) / name.format(**fmt)


def require(run_dir: str | Path, name: str, stage: str, **fmt: str) -> Path:
    """Path of an earlier stage's output, or a clear error naming the stage to run first."""
    p = stage_path(run_dir, name, **fmt)
    if not p.exists():
        raise FileNotFoundError(f"{p} not found: run `python -m labeling {stage} --run-dir {run_dir}` first")
    return p


def save_config(run_dir: str | Path, stage: str, cfg: object, extra: dict | None = None) -> Path:
    """Write the stage's resolved config as config_<stage>.json (with extra and the provenance: git commit,
    machine) and as config_<stage>.toml (``--config`` reads it back; the provenance as comments)."""
    p = Path(run_dir) / f"config_{stage}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    prov = provenance()
    p.write_text(json.dumps({**asdict(cfg), **(extra or {}), "provenance": prov}, indent=1, default=str))
    p.with_suffix(".toml").write_text(config.to_toml(cfg, prov))
    return p


def load_config(run_dir: str | Path, stage: str) -> dict:
    return json.loads(require(run_dir, f"config_{stage}.json", stage).read_text())


def load_traces(run_dir: str | Path) -> dict[str, np.ndarray]:
    """The collect stage's arrays (see labeling/collect.py for the fields)."""
    with np.load(require(run_dir, TRACES, "collect")) as f:
        return {k: f[k] for k in f.files}


def load_labelled(run_dir: str | Path) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """labels.csv (indexed by its trace row) and the collect stage's arrays, checked to be the same mismatches."""
    tr = load_traces(run_dir)
    lab = pd.read_csv(require(run_dir, LABELS, "label")).set_index("row")
    if (tr["draft_id"][lab.index.to_numpy()] != lab["draft_id"].to_numpy()).any():
        raise ValueError(f"{run_dir}: labels.csv does not match traces.npz (draft ids differ)")
    return lab, tr
