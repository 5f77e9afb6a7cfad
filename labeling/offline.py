"""Offline check of the trained heads on held-out labelled mismatches: what each head would accept, per channel and
tau, split by label (harmful, helpful, harmless).  No generation, so it runs in seconds where ``evaluate``'s live
sweep takes hours on a shared CPU.

The held-out mismatches are those of the episodes the train stage held out for validation (the same seeded split,
``labeling.train.split_episodes``); train picked its epoch on them, so they are not a clean test set.  A mismatch is
accepted iff the head's repair probability p < tau (the edge rejects iff p >= tau).  Writes offline_sweep.csv.
``python -m labeling offline --run-dir R``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from labeling.config import CHANNELS, CHANNELS_TEXT, VARIANTS, TrainConfig
from labeling.evaluate import channel_csi
from labeling.relabel import LABEL
from labeling.store import HEADS, LABELS, load_config, load_traces, require, save_config, stage_path
from labeling.train import split_episodes
from wisv.head.model import HeadPolicy
from wisv.head.store import load_head


@dataclass
class OfflineConfig:
    """Which heads, channels and taus the offline check sweeps."""

    run_dir: str = "runs/labeling"  # a run directory with label and train done
    taus: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # thresholds swept
    channels: dict[str, tuple[float, float]] = field(
        default_factory=lambda: dict(CHANNELS), metadata=CHANNELS_TEXT)  # regimes NAME=RATE/RTT, Mbit/s and ms


def accept_rates(p: np.ndarray, labels: pd.DataFrame, tau: float) -> dict[str, float]:
    """Fraction accepted (p < tau) of all, harmful, helpful and harmless (neither) mismatches (nan for an empty
    class)."""
    acc = p < tau
    harmful, helpful = labels[LABEL].to_numpy() == 1, labels["helpful"].to_numpy() == 1
    harmless = ~harmful & ~helpful
    rate = lambda m: float(acc[m].mean()) if m.any() else float("nan")  # noqa: E731
    return {"accepted": float(acc.mean()), "accepted_harmful": rate(harmful), "accepted_helpful": rate(helpful),
            "accepted_harmless": rate(harmless)}


def run(cfg: OfflineConfig) -> pd.DataFrame:
    torch.set_num_threads(1)
    labels = pd.read_csv(require(cfg.run_dir, LABELS, "label"))
    traces = load_traces(cfg.run_dir)
    tcfg = load_config(cfg.run_dir, "train_csi")
    val = split_episodes(labels["episode"].to_numpy(), tcfg.get("val_frac", TrainConfig.val_frac), tcfg.get("seed", 0))
    held = labels[val]
    rows = held["row"].to_numpy()
    hd, ht = (torch.from_numpy(traces[k][rows].astype(np.float32)) for k in ("h_d", "h_t"))  # [N, d]
    recs = []
    for variant in VARIANTS:
        policy = HeadPolicy(load_head(require(cfg.run_dir, HEADS, "train", variant=variant)))
        for ch, csi in channel_csi(cfg.channels).items():
            p = policy.reject_probs(hd, ht, list(range(len(rows))), csi).numpy()
            recs += [{"variant": variant, "channel": ch, "tau": tau, "mismatches": len(rows),
                      "harmful": int(held[LABEL].sum()), **accept_rates(p, held, tau)} for tau in cfg.taus]
    df = pd.DataFrame(recs)
    df.to_csv(stage_path(cfg.run_dir, "offline_sweep.csv"), index=False)
    save_config(cfg.run_dir, "offline", cfg)
    with pd.option_context("display.width", 160, "display.max_rows", 200):
        print(df.round(3).to_string(index=False))
    return df
