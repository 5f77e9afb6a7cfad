"""Stage 4 (train): fit the decision head on relabeled instances with class-balanced BCE (eq. 26).

Validation holds out whole episodes (``val_frac``), so no prompt is in both sets.  The positive
class (a = 1, repair) is rare, so BCE uses ``pos_weight = n_neg / n_pos`` of the training set.  AdamW
adds the weight decay.  The epoch with the lowest validation loss is kept.  Writes the head
(``heads/<variant>/``), its per-epoch curves (``train_<variant>.csv``) and their plot (``.png``).
A variant whose CSI column is constant (the no-CSI ablation) trains a head without CSI input.
"""
from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm import tqdm

from labeling.config import TrainConfig
from labeling.plots import plot_curves
from labeling.store import HEADS, INSTANCES, load_config, load_traces, require, save_config, stage_path
from wisv.head.model import DecisionHead, HeadConfig, build_inputs
from wisv.head.store import save_head
from wisv.tasks.evaluate import recall_fpr


def make_dataset(traces: dict, inst: dict, use_csi: bool) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """(z [N, d_in], a [N], episode [N]) for the instances."""
    rows = inst["row"]
    hd = torch.from_numpy(traces["h_d"][rows].astype(np.float32))  # [N, d_d]
    ht = torch.from_numpy(traces["h_t"][rows].astype(np.float32))  # [N, d_t]
    csi = torch.from_numpy(inst["csi"].astype(np.float32)) if use_csi else None  # [N, d_c]
    return build_inputs(hd, ht, csi), torch.from_numpy(inst["a"].astype(np.float32)), traces["episode"][rows]


def split_episodes(episodes: np.ndarray, val_frac: float, seed: int) -> np.ndarray:
    """Boolean mask [N] of validation instances: a seeded random val_frac of the episodes."""
    if not 0 < val_frac < 1:
        raise ValueError(f"val_frac must be in (0, 1), got {val_frac}")
    uniq = np.unique(episodes)
    rng = np.random.default_rng(seed)
    val = rng.choice(uniq, size=max(1, round(val_frac * len(uniq))), replace=False)
    return np.isin(episodes, val)


def fit(head: DecisionHead, z: torch.Tensor, a: torch.Tensor, val: np.ndarray, cfg: TrainConfig) -> pd.DataFrame:
    """Train in place; returns per-epoch train/val loss, val recall and FPR at p >= 0.5."""
    g = torch.Generator().manual_seed(cfg.seed)
    vm = torch.from_numpy(val)
    zt, at, zv, av = z[~vm], a[~vm], z[vm], a[vm]
    n_pos = float(at.sum())
    if n_pos == 0 or n_pos == len(at):
        raise ValueError(f"training set has {int(n_pos)} repair labels of {len(at)}: need both classes")
    head.set_standardisation(zt)
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor((len(at) - n_pos) / n_pos))
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    log, best = [], (float("inf"), None)
    for epoch in tqdm(range(cfg.epochs), desc="train"):
        head.train()
        perm = torch.randperm(len(at), generator=g)
        total = 0.0
        for i in range(0, len(perm), cfg.batch):
            idx = perm[i:i + cfg.batch]
            loss = loss_fn(head.logits(zt[idx]), at[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        row = {"epoch": epoch + 1, "train_loss": total / len(at), **_val_metrics(head, zv, av, loss_fn)}
        log.append(row)
        if row["val_loss"] < best[0]:
            best = (row["val_loss"], copy.deepcopy(head.state_dict()))
    head.load_state_dict(best[1])
    return pd.DataFrame(log)


@torch.no_grad()
def _val_metrics(head: DecisionHead, z: torch.Tensor, a: torch.Tensor, loss_fn) -> dict[str, float]:
    head.eval()
    logits = head.logits(z)
    recall, fpr = recall_fpr(logits >= 0, a)
    return {"val_loss": float(loss_fn(logits, a)), "val_recall": recall, "val_fpr": fpr}


def run(cfg: TrainConfig) -> DecisionHead:
    """Train heads/<variant> from instances_<variant>.npz and the collected hidden states."""
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(1)
    inst = dict(np.load(require(cfg.run_dir, INSTANCES, "relabel", variant=cfg.variant)))
    traces = load_traces(cfg.run_dir)
    use_csi = bool(np.ptp(inst["csi"], axis=0).max() > 0)
    z, a, episodes = make_dataset(traces, inst, use_csi)
    ccfg = load_config(cfg.run_dir, "collect")
    hcfg = HeadConfig(d_draft=traces["h_d"].shape[1], d_target=traces["h_t"].shape[1],
                      csi_dim=inst["csi"].shape[1] if use_csi else 0, hidden=cfg.hidden, dropout=cfg.dropout,
                      hidden_layer=ccfg["hidden_layer"],
                      notes={"variant": cfg.variant, "run_dir": str(cfg.run_dir), "instances": int(len(a)),
                             "repair_rate": float(a.mean())})
    head = DecisionHead(hcfg)
    log = fit(head, z, a, split_episodes(episodes, cfg.val_frac, cfg.seed), cfg)
    out = save_head(head, stage_path(cfg.run_dir, HEADS, variant=cfg.variant))
    log.to_csv(stage_path(cfg.run_dir, f"train_{cfg.variant}.csv"), index=False)
    plot_curves(log, stage_path(cfg.run_dir, f"train_{cfg.variant}.png"), f"decision head ({cfg.variant})")
    save_config(cfg.run_dir, f"train_{cfg.variant}", cfg, {"use_csi": use_csi})
    best = log.loc[log["val_loss"].idxmin()]
    print(f"train ({cfg.variant}): {len(a)} instances, best epoch {int(best['epoch'])}: "
          f"val loss {best['val_loss']:.4f}, "
          f"recall {best['val_recall']:.3f}, FPR {best['val_fpr']:.3f} -> {out}")
    return head
