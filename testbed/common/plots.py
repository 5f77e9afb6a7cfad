"""The figure of one ``testbed.run``: latency per prompt and AAL per protocol, read from what the run wrote.

Latency is each prompt's ``t_e2e_s`` in ``<protocol>/outputs.jsonl``; AAL is the ``aal`` column of the run's
``summary.csv`` (computed by ``testbed.common.summary``, not again here).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from wisv.tasks.jsonl import read_jsonl  # noqa: E402

FIGURE = "run.png"  # written into the run directory


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


def plot_run(run_dir: str | Path) -> Path:
    """Write <run_dir>/run.png: latency per prompt (one line per protocol) beside AAL per protocol; its path."""
    run_dir = Path(run_dir)
    lat = latency_by_prompt(run_dir)
    aal = pd.read_csv(run_dir / "summary.csv").set_index("protocol")["aal"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [2.2, 1]})
    for proto in lat.columns:
        left.plot(range(1, len(lat) + 1), lat[proto], marker="o", markersize=3, label=proto)
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.set(xlabel="prompt (prompts.jsonl order)", ylabel="latency per prompt (s)", title="end-to-end latency per prompt")
    left.set_ylim(bottom=0)
    left.grid(True, alpha=0.3)
    left.legend(fontsize=8)
    bars = right.bar(aal.index, aal.to_numpy(), color=[f"C{i}" for i in range(len(aal))])
    right.bar_label(bars, fmt="%.2f", fontsize=8)
    right.set(ylabel="AAL (accepted tokens / round)", title="AAL per protocol")
    right.grid(True, axis="y", alpha=0.3)
    fig.suptitle(run_dir.name, fontsize=10)
    fig.tight_layout()
    path = run_dir / FIGURE
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
