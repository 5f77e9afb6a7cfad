"""Learning curve of the decision head: its quality (ROC AUC on the harmful label) against the number of labelled
mismatches it was trained on.

Whole episodes are split once (seeded) into a held-out test set (``test_frac``) and a training pool, shuffled.  For
each size n the head (no CSI input, trained on ``a = y``, as the ablation; labeling/train.py's fit with its own
validation split of episodes for early stopping) is trained on the first n mismatches of the pool and scored by
its rejection probability on every held-out mismatch.  AUC is the Mann-Whitney statistic (ties count a half).
A feature ablation repeats the curve on other inputs of the same MLP: ``hidden`` is the head's own [h_d ; h_t]
(eq. 23, without CSI); ``edge`` is three scalars the edge has at verification for free (the target's NLL of the
draft token and of its own token there, and their difference; labels.csv's ``nll_draft``/``nll_target``); and
``hidden+edge`` both.  Writes learning_curve.csv (a ``features`` column) and learning_curve.png.
``python -m labeling curve --run-dir R``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch

from labeling.config import TrainConfig
from labeling.plots import plot_learning_curve
from labeling.relabel import LABEL
from labeling.store import LABELS, load_traces, require, save_config, stage_path
from labeling.train import fit, split_episodes
from wisv.head.model import DecisionHead, HeadConfig, build_inputs

FEATURE_SETS = ("hidden", "edge", "hidden+edge")
EDGE_COLUMNS = ("nll_draft", "nll_target")  # labels.csv's target NLLs at the mismatch (edge-side scalars)


@dataclass
class CurveConfig:
    """Sizes, split and training of the learning curve."""

    run_dir: str = "runs/labeling"  # a run directory with label done
    sizes: tuple[int, ...] = (100, 250, 500, 1000, 2000, 4000)  # training mismatches per point (capped at the pool)
    test_frac: float = 0.25  # fraction of episodes held out for the AUC
    epochs: int = 20  # passes over the training mismatches per point
    seed: int = 0  # episode split and training seed
    features: tuple[str, ...] = field(default=FEATURE_SETS, metadata={
        "choices": FEATURE_SETS})  # inputs compared: hidden = [h_d ; h_t]; edge = the target's NLLs; hidden+edge


def roc_auc(scores: np.ndarray, y: np.ndarray) -> float:
    """P(score of a random positive > score of a random negative), ties a half; nan if a class is absent."""
    scores, y = np.asarray(scores, float), np.asarray(y).astype(bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = pd.Series(scores).rank(method="average").to_numpy()  # 1-based, ties averaged
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def curve_sizes(sizes: tuple[int, ...], pool: int) -> list[int]:
    """The requested sizes up to the pool, and the whole pool as the last point."""
    return sorted({n for n in sizes if n < pool} | {pool})


def learning_curve(z: torch.Tensor, y: np.ndarray, episodes: np.ndarray, cfg: CurveConfig) -> pd.DataFrame:
    """One row per size: n, harmful in training, held-out AUC (z [N, d_in], y [N] in {0, 1}, episodes [N])."""
    test = split_episodes(episodes, cfg.test_frac, cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    pool_eps = rng.permutation(np.unique(episodes[~test]))
    order = np.concatenate([np.flatnonzero(episodes == e) for e in pool_eps])  # the pool, episode by episode
    tcfg = TrainConfig(epochs=cfg.epochs, seed=cfg.seed, val_frac=0.2)
    rows = []
    for n in curve_sizes(cfg.sizes, len(order)):
        idx = order[:n]
        if len(np.unique(y[idx])) < 2 or len(np.unique(episodes[idx])) < 2:
            continue
        torch.manual_seed(cfg.seed)
        head = DecisionHead(HeadConfig(d_draft=z.shape[1], d_target=0, csi_dim=0, hidden=tcfg.hidden,
                                       dropout=tcfg.dropout))  # [h_d ; h_t] as one input block
        fit(head, z[idx], torch.from_numpy(y[idx].astype(np.float32)),
            split_episodes(episodes[idx], tcfg.val_frac, cfg.seed), replace(tcfg))
        head.eval()
        with torch.no_grad():
            p = torch.sigmoid(head.logits(z[torch.from_numpy(test)])).numpy()
        rows.append({"n_train": n, "harmful_train": int(y[idx].sum()), "n_test": int(test.sum()),
                     "harmful_test": int(y[test].sum()), "auc": roc_auc(p, y[test])})
    return pd.DataFrame(rows)


def feature_inputs(labels: pd.DataFrame, traces: dict, which: str) -> torch.Tensor | None:
    """The MLP's input for a feature set (None where the labels lack the edge columns)."""
    rows = labels["row"].to_numpy()
    hidden = build_inputs(torch.from_numpy(traces["h_d"][rows].astype(np.float32)),
                          torch.from_numpy(traces["h_t"][rows].astype(np.float32)), None)  # [N, d_d + d_t]
    if which == "hidden":
        return hidden
    if not set(EDGE_COLUMNS) <= set(labels.columns):
        return None
    nd, nt = (torch.tensor(labels[c].to_numpy(), dtype=torch.float32) for c in EDGE_COLUMNS)
    edge = torch.stack([nd, nt, nd - nt], 1)  # [N, 3]
    return edge if which == "edge" else torch.cat([hidden, edge], 1)


def run(cfg: CurveConfig) -> pd.DataFrame:
    torch.set_num_threads(1)
    labels = pd.read_csv(require(cfg.run_dir, LABELS, "label"))
    traces = load_traces(cfg.run_dir)
    y, episodes, parts = labels[LABEL].to_numpy(), labels["episode"].to_numpy(), []
    for which in cfg.features:
        z = feature_inputs(labels, traces, which)
        if z is None:
            print(f"curve: no {'/'.join(EDGE_COLUMNS)} in labels.csv (an older label run); {which} skipped")
            continue
        parts.append(learning_curve(z, y, episodes, cfg).assign(features=which))
    df = pd.concat(parts, ignore_index=True)
    df.to_csv(stage_path(cfg.run_dir, "learning_curve.csv"), index=False)
    plot_learning_curve(df, stage_path(cfg.run_dir, "learning_curve.png"))
    save_config(cfg.run_dir, "curve", cfg)
    print(df.round(3).to_string(index=False))
    return df
