"""Figures of ``testbed.simulate``: the paper's Fig. 4 layout (latency vs K per link) and the validation scatter."""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from testbed.common.plots import protocol_color  # noqa: E402

PLAIN = FuncFormatter(lambda v, _pos: f"{v:g}")  # 2 rather than 2x10^0 on log axes

MARKERS = {"greedy": "o", "reject": "s", "WISV-SH": "^", "WISV-FH": "D", "SH (lossless)": "v", "FH (lossless)": "d",
           "tree": "P", "auto": "X"}  # a method's marker; its colour is its protocol's (testbed.common.plots)


def fig4(table: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """One panel per (rate, RTT): rows = rates, columns = RTTs; latency per prompt vs K, one line per method."""
    rates, rtts = sorted(table["rate_mbps"].unique()), sorted(table["rtt_ms"].unique())
    fig, axes = plt.subplots(len(rates), len(rtts), figsize=(4.2 * len(rtts), 3.3 * len(rates)), squeeze=False,
                             sharex=True)
    for i, rate in enumerate(rates):
        for j, rtt in enumerate(rtts):
            ax = axes[i][j]
            sub = table[(table["rate_mbps"] == rate) & (table["rtt_ms"] == rtt)]
            for method, g in sub.groupby("method", sort=False):
                color, marker = protocol_color(str(method)), MARKERS.get(method, "x")
                g = g.sort_values("draft_len")
                ax.plot(g["draft_len"], g["latency_s"], marker=marker, color=color, label=method)
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(PLAIN)
            ax.yaxis.set_minor_formatter(PLAIN)
            ax.tick_params(axis="y", which="minor", labelsize=7)
            ax.set_title(f"{rate:g} Mbps, RTT {rtt:g} ms", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            if i == len(rates) - 1:
                ax.set_xlabel("draft window K")
            if j == 0:
                ax.set_ylabel("latency per prompt (s, log)")
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(textwrap.fill(title, 55 * len(rtts)), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def scatter(val: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Predicted vs measured latency per prompt, one colour per protocol, with the y = x line."""
    fig, ax = plt.subplots(figsize=(4.8, 4.5))
    for proto, g in val.groupby("protocol"):
        ax.scatter(g["measured_s"], g["predicted_s"], s=14, label=proto)
    lo = float(min(val["measured_s"].min(), val["predicted_s"].min()))
    hi = float(max(val["measured_s"].max(), val["predicted_s"].max()))
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    ax.plot([lo, hi], [0.9 * lo, 0.9 * hi], "k:", lw=0.8, label="±10%")
    ax.plot([lo, hi], [1.1 * lo, 1.1 * hi], "k:", lw=0.8)
    ax.set_xlabel("measured latency per prompt (s)")
    ax.set_ylabel("predicted latency per prompt (s)")
    ax.legend(fontsize=8)
    ax.set_title(textwrap.fill(title, 60), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
