"""Plots of the pipeline: training curves, and the evaluate sweep (a metric vs tau per channel, CSI-aware head solid,
no-CSI ablation dashed)."""
from __future__ import annotations

import matplotlib
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLES = {"csi": ("-", "o"), "nocsi": ("--", "x")}
LABELS = {"csi": "CSI-aware head", "nocsi": "no-CSI ablation"}


def plot_sweep(df: pd.DataFrame, path, metric: str, ylabel: str) -> None:
    """metric vs tau, one colour per channel; greedy SD as a dotted horizontal line per channel.  A head without
    CSI input gives the same curve in every channel, so its dashed lines overlap."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, ch in enumerate(df.channel.unique()):
        c = colours[i % len(colours)]
        for variant, (style, marker) in STYLES.items():
            d = df[(df.variant == variant) & (df.channel == ch)].sort_values("tau")
            if not d.empty:
                ax.plot(d.tau, d[metric], style, marker=marker, ms=4, color=c, alpha=0.85,
                        label=f"{ch}: {LABELS[variant]}")
        g = df[(df.variant == "greedy") & (df.channel == ch)]
        if not g.empty:
            ax.axhline(float(g[metric].iloc[0]), ls=":", color=c, lw=1, label=f"{ch}: greedy SD")
    ax.set(xlabel="tau (reject iff p >= tau)", ylabel=ylabel, title=f"{ylabel} vs tau per channel")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_curves(log: pd.DataFrame, path, title: str) -> None:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax1.plot(log["epoch"], log["train_loss"], label="train")
    ax1.plot(log["epoch"], log["val_loss"], label="validation")
    ax1.set(xlabel="epoch", ylabel="class-balanced BCE", title=title)
    ax1.legend()
    ax2.plot(log["epoch"], log["val_recall"], label="recall (repair)")
    ax2.plot(log["epoch"], log["val_fpr"], label="false-positive rate")
    ax2.set(xlabel="epoch", ylabel="validation, p >= 0.5", ylim=(0, 1))
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_learning_curve(df: pd.DataFrame, path) -> None:
    """Held-out AUC on the harmful label vs the number of labelled training mismatches (log x), a line per feature
    set where the frame has a ``features`` column."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, d in (df.groupby("features", sort=False) if "features" in df else [("[h_d ; h_t]", df)]):
        ax.plot(d["n_train"], d["auc"], "-o", ms=4, label=str(name))
    ax.axhline(0.5, ls=":", color="grey", lw=1, label="chance")
    ax.set(xscale="log", xlabel="labelled training mismatches", ylabel="held-out AUC (harmful)",
           title="decision head: learning curve", ylim=(0.4, 1.0))
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_fig3(df: pd.DataFrame, path, channels: tuple[str, str]) -> None:
    """The paper's Fig. 3 analog: accuracy vs tau, one panel per channel (poor, good); the CSI-aware head solid, the
    no-CSI ablation dashed, greedy SD (the target's own accuracy) dotted."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax, ch in zip(axes, channels):
        for variant, (style, marker) in STYLES.items():
            d = df[(df.variant == variant) & (df.channel == ch)].sort_values("tau")
            if not d.empty:
                ax.plot(d.tau, d.accuracy, style, marker=marker, ms=4, label=LABELS[variant])
        g = df[(df.variant == "greedy") & (df.channel == ch)]
        if not g.empty:
            ax.axhline(float(g.accuracy.iloc[0]), ls=":", color="k", lw=1, label="greedy SD (= target only)")
        ax.set(xlabel="tau (reject iff p >= tau)", title=f"{ch} channel")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("accuracy")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_fig5(df: pd.DataFrame, path) -> None:
    """The paper's Fig. 5 analog, CSI-aware vs CSI-blind: AAL and predicted latency vs tau, one colour per channel,
    the CSI-aware head solid, the no-CSI ablation dashed."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, metric, ylabel in zip(axes, ("aal", "latency_s"), ("AAL", "predicted latency per prompt (s)")):
        for i, ch in enumerate(df.channel.unique()):
            for variant, (style, marker) in STYLES.items():
                d = df[(df.variant == variant) & (df.channel == ch)].sort_values("tau")
                if not d.empty:
                    ax.plot(d.tau, d[metric], style, marker=marker, ms=4, color=colours[i % len(colours)],
                            label=f"{ch}: {LABELS[variant]}")
        ax.set(xlabel="tau (reject iff p >= tau)", ylabel=ylabel)
        ax.legend(fontsize=7)
    fig.suptitle("CSI-aware (solid) vs CSI-blind (dashed)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
