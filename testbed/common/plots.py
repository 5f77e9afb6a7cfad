"""The report figure of one ``testbed.run`` (run.png), read from what the run wrote, and the protocols' colours.

Panels: latency per prompt (``<protocol>/outputs.jsonl``); the mean round split into draft, comm, verify, head and
the rest (host work) per protocol; AAL and rounds per prompt (``summary.csv``, computed by testbed.common.summary,
not again here); bytes up and down per round; and for one protocol, over its rounds, the CSI in force and the UE's
estimate (rates and RTT) with K.  The title names the pair, the link, K and the head (``config.json``).
Every figure of the project colours a protocol the same (``protocol_color``).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from wisv.tasks.jsonl import read_jsonl  # noqa: E402

FIGURE = "run.png"  # written into the run directory
PROTOCOL_COLORS = {"greedy": "tab:blue", "reject": "tab:red", "fh": "tab:green", "sh": "tab:orange",
                   "auto": "tab:brown", "tree": "tab:purple", "server": "black",
                   "device": "tab:gray"}  # one colour per protocol, in every figure
SPARE_COLORS = ("tab:pink", "tab:olive", "tab:cyan", "silver")  # for names not in PROTOCOL_COLORS
SPLIT = {"draft": "t_draft_s", "comm": "t_comm_s", "verify": "t_verify_s", "head": "t_head_s"}  # round time parts
SPLIT_COLORS = {"draft": "#4c72b0", "comm": "#dd8452", "verify": "#55a868", "head": "#c44e52", "other": "#bbbbbb"}
CSI_PREFERENCE = ("auto", "sh", "fh", "tree", "greedy", "reject")  # the protocol whose CSI and K are drawn


def protocol_color(name: str) -> str:
    """A protocol's colour (lower-cased, with WISV-/(lossless) labels reduced to the protocol)."""
    key = name.lower().removeprefix("wisv-").removesuffix(" (lossless)")
    if key in PROTOCOL_COLORS:
        return PROTOCOL_COLORS[key]
    return SPARE_COLORS[sum(map(ord, key)) % len(SPARE_COLORS)]


def latency_by_prompt(run_dir: str | Path) -> pd.DataFrame:
    """Seconds per prompt [prompt x protocol], prompts in prompts.jsonl order; NaN where a prompt failed."""
    run_dir = Path(run_dir)
    order = [str(p["prompt_id"]) for p in read_jsonl(run_dir / "prompts.jsonl")]
    cols = {}
    for proto in pd.read_csv(run_dir / "summary.csv")["protocol"]:
        out = pd.read_json(run_dir / proto / "outputs.jsonl", lines=True, dtype={"prompt_id": str})
        ok = out[out["error"].isna()] if "error" in out else out
        times = ok.set_index("prompt_id")["t_e2e_s"] if "t_e2e_s" in ok else pd.Series(dtype=float)  # all failed: none
        cols[proto] = times.reindex(order)
    return pd.DataFrame(cols, index=pd.Index(order, name="prompt_id"))


def rounds_of(run_dir: Path, protocols: list[str]) -> dict[str, pd.DataFrame]:
    """Each protocol's rounds.csv (an empty frame where it has none)."""
    out = {}
    for p in protocols:
        path = run_dir / p / "rounds.csv"
        out[p] = pd.read_csv(path) if path.exists() and path.stat().st_size > 1 else pd.DataFrame()
    return out


def time_split_ms(rounds: pd.DataFrame) -> dict[str, float]:
    """Mean round time split into SPLIT's parts and the rest of t_round_s (host work), ms (pure)."""
    if not len(rounds):
        return {k: 0.0 for k in [*SPLIT, "other"]}
    parts = {k: float(rounds[c].fillna(0).mean()) * 1e3 for k, c in SPLIT.items()}
    parts["other"] = max(0.0, float(rounds["t_round_s"].mean()) * 1e3 - sum(parts.values()))
    return parts


def run_title(cfg: dict, name: str) -> str:
    """'pair toy, link 20/20 Mbps RTT 20 ms, K=8, head ... (tau=0.5), CSI configured' from config.json (pure)."""
    if not cfg:
        return name
    link = cfg.get("link") or {}
    rate = lambda r: "unlimited" if not r else f"{r:g}"  # noqa: E731
    if not cfg.get("link_emulated", True):
        desc = f"real link to {cfg.get('remote_edge')}"
    elif link.get("csi_trace"):
        desc = f"trace {Path(link['csi_trace']).name}"
    else:
        desc = (f"{rate(link.get('rate_up_mbps'))}/{rate(link.get('rate_down_mbps'))} Mbps, RTT "
                f"{link.get('rtt_ms', 0):g} ms" + (f", PER {link['per']:g}" if link.get("per") else ""))
    head = str(cfg.get("head_resolved") or cfg.get("head") or "-")
    path, _, rest = head.partition(" (")
    head = "/".join(Path(path).parts[-2:]) + (f" ({rest}" if rest else "")
    csi = f", CSI {cfg['csi_resolved']}" if cfg.get("csi_resolved") else ""
    return f"{name}: pair {cfg.get('pair') or 'toy'}, link {desc}, K={cfg.get('draft_len')}, head {head}{csi}"


def plot_run(run_dir: str | Path) -> Path:
    """Write <run_dir>/run.png (the panels in the module docstring); its path."""
    run_dir = Path(run_dir)
    summary = pd.read_csv(run_dir / "summary.csv").set_index("protocol")
    protos = list(summary.index)
    rounds = rounds_of(run_dir, protos)
    cfg_path = run_dir / "config.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
    fig, axes = plt.subplots(2, 3, figsize=(15, 7.8))
    _latency(axes[0][0], latency_by_prompt(run_dir))
    _split(axes[0][1], protos, rounds)
    _aal(axes[0][2], summary)
    _bytes(axes[1][0], protos, rounds)
    shown = next((p for p in CSI_PREFERENCE if p in protos and len(rounds[p])), None)
    _csi(axes[1][1], axes[1][2], shown, rounds.get(shown, pd.DataFrame()))
    fig.suptitle(run_title(cfg, run_dir.name), fontsize=10)
    fig.tight_layout()
    path = run_dir / FIGURE
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _latency(ax, lat: pd.DataFrame) -> None:
    for proto in lat.columns:
        ax.plot(range(1, len(lat) + 1), lat[proto], marker="o", markersize=3, label=proto, color=protocol_color(proto))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="prompt (prompts.jsonl order)", ylabel="s", title="end-to-end latency per prompt")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def _split(ax, protos: list[str], rounds: dict[str, pd.DataFrame]) -> None:
    """Horizontal stacked bars: one per protocol (names on the y axis never overlap)."""
    left = [0.0] * len(protos)
    for part, color in SPLIT_COLORS.items():
        widths = [time_split_ms(rounds[p])[part] for p in protos]
        ax.barh(protos, widths, left=left, color=color, label=part)
        left = [a + b for a, b in zip(left, widths)]
    for y, total in enumerate(left):
        ax.text(total, y, f" {total:.0f}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel="ms per round (mean)", title="where a round's time goes")
    ax.set_xlim(right=max(left + [1.0]) * 1.15)
    ax.legend(fontsize=7, ncol=5, loc="lower center", bbox_to_anchor=(0.5, -0.32), frameon=False)
    ax.grid(True, axis="x", alpha=0.3)


def _aal(ax, summary: pd.DataFrame) -> None:
    protos = list(summary.index)
    ys = range(len(protos))
    h = 0.38
    aal = ax.barh([y - h / 2 for y in ys], summary["aal"].fillna(0), height=h,
                  color=[protocol_color(p) for p in protos], label="AAL (tokens/round)")
    rounds = summary["rounds_per_prompt"] if "rounds_per_prompt" in summary else pd.Series(0.0, summary.index)
    rnd = ax.barh([y + h / 2 for y in ys], rounds.fillna(0), height=h,
                  color=[protocol_color(p) for p in protos], alpha=0.4, hatch="//", label="rounds per prompt")
    ax.bar_label(aal, fmt="%.2f", fontsize=8, padding=2)
    ax.bar_label(rnd, fmt="%.1f", fontsize=8, padding=2)
    ax.set_yticks(list(ys), protos)
    ax.invert_yaxis()
    top = max([*summary["aal"].fillna(0), *rounds.fillna(0), 1.0])
    ax.set_xlim(right=top * 1.2)
    ax.set(title="AAL and rounds per prompt")
    ax.legend(fontsize=7, ncol=2, loc="lower center", bbox_to_anchor=(0.5, -0.25), frameon=False)
    ax.grid(True, axis="x", alpha=0.3)


def _bytes(ax, protos: list[str], rounds: dict[str, pd.DataFrame]) -> None:
    ys = range(len(protos))
    h = 0.38
    mean = lambda p, c: float(rounds[p][c].mean()) if len(rounds[p]) else 0.0  # noqa: E731
    up = ax.barh([y - h / 2 for y in ys], [mean(p, "uplink_bytes") for p in protos], height=h,
                 color=[protocol_color(p) for p in protos], label="up (UE -> edge)")
    down = ax.barh([y + h / 2 for y in ys], [mean(p, "downlink_bytes") for p in protos], height=h,
                   color=[protocol_color(p) for p in protos], alpha=0.4, hatch="..", label="down")
    ax.bar_label(up, fmt="%.0f", fontsize=8, padding=2)
    ax.bar_label(down, fmt="%.0f", fontsize=8, padding=2)
    ax.set_yticks(list(ys), protos)
    ax.invert_yaxis()
    ax.set_xlim(right=max([mean(p, c) for p in protos for c in ("uplink_bytes", "downlink_bytes")] + [1.0]) * 1.25)
    ax.set(xlabel="bytes per round (mean, on the wire)", title="bytes up and down")
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(True, axis="x", alpha=0.3)


def _csi(ax_rate, ax_rtt, proto: str | None, r: pd.DataFrame) -> None:
    """Rates and RTT over the protocol's rounds (in run order): the link's (solid) and the UE's estimate (dashed);
    K drafted per round on the rate panel's right axis."""
    if proto is None or not len(r):
        for ax in (ax_rate, ax_rtt):
            ax.text(0.5, 0.5, "no rounds", ha="center", va="center", transform=ax.transAxes)
        return
    x = range(1, len(r) + 1)
    lines = (("rate_up_mbps", "-", "up, link"), ("rate_down_mbps", "-", "down, link"),
             ("est_rate_up_mbps", "--", "up, estimate"), ("est_rate_down_mbps", "--", "down, estimate"))
    for col, style, label in lines:
        if col in r and r[col].notna().any():
            ax_rate.plot(x, r[col], style, color="tab:blue" if "up" in label else "tab:red", label=label,
                         lw=3.5 if label == "up, link" else 1.5, alpha=0.35 if label == "up, link" else 0.9)
    ax_rate.set(xlabel=f"round ({proto}, all prompts in order)", ylabel="Mbit/s",
                title=f"CSI and K over the run ({proto})")
    rates = [v for col, _, _ in lines if col in r for v in r[col].dropna() if math.isfinite(v)]
    ax_rate.set_ylim(0, max(rates + [1.0]) * 1.3)  # room above the lines for the legend's and the link's lines
    ax_rate.grid(True, alpha=0.3)
    k = ax_rate.twinx()
    k.step(x, r["drafted"], where="mid", color="gray", alpha=0.6, label="K (drafted)")
    k.set_ylabel("K (tokens drafted)")
    k.set_ylim(0, max(float(r["drafted"].max()), 1.0) * 1.6)
    k.yaxis.set_major_locator(MaxNLocator(integer=True))
    handles = ax_rate.get_legend_handles_labels()
    more = k.get_legend_handles_labels()
    ax_rate.legend(handles[0] + more[0], handles[1] + more[1], fontsize=7, loc="lower right", ncol=2)
    for col, style, label in (("rtt_ms", "-", "link"), ("est_rtt_ms", "--", "estimate")):
        if col in r and r[col].notna().any():
            ax_rtt.plot(x, r[col], style, color="tab:green", label=label)
    if "protocol" in r and r["protocol"].nunique() > 1:  # auto: which protocol each round used
        for p, g in r.reset_index(drop=True).groupby("protocol"):
            ax_rtt.scatter(g.index + 1, [0] * len(g), s=8, color=protocol_color(p), label=f"round ran {p}")
    ax_rtt.set(xlabel=f"round ({proto})", ylabel="ms", title="RTT: link and estimate")
    ax_rtt.set_ylim(bottom=0, top=_top(r) * 1.3)
    ax_rtt.grid(True, alpha=0.3)
    ax_rtt.legend(fontsize=7, loc="lower right")


def _top(r: pd.DataFrame) -> float:
    vals = [v for c in ("rtt_ms", "est_rtt_ms") if c in r for v in r[c].dropna()]
    return max(vals) if vals and math.isfinite(max(vals)) and max(vals) > 0 else 1.0
