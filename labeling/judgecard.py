"""Stage (card): HEAD_CARD.md of the shipped judges, from the files of ``judges``, ``peers``, live runs and Table I.

Every table is read from a saved file; the card names files relative to the repository.  Live runs
(``--live NAME=RUN_DIR``, a ``python -m testbed.run`` output each) and a Table I analog (``--table1 DIR``, a
``python -m testbed.simulate`` output) are optional.  ``--notes FILE`` appends a hand-written section (what the
numbers show), kept in the repository beside the card so that a rebuild keeps it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import pandas as pd

from wisv.records.paired import RELATIVE_COLUMNS, relative_rows

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

REPO = Path(__file__).resolve().parents[1]
LIVE_COLS = ["prompts", "accuracy", "aal", "rounds_per_prompt", "tokens_per_prompt", "rounds_per_100_tokens",
             "latency_s", "uplink_bytes", "matches_target",
             "drift_rouge_l", "fluency_ppl_ratio", "fluency_ext_ppl_ratio"]


@dataclass
class CardConfig:
    """Where the card's inputs are and where it goes."""

    results_dir: str = "results/smollm2-judges"  # judges_*.csv, judges.json, peers.csv (and the figures it draws)
    heads_dir: str = "wisv/assets/smollm2-judges"  # the shipped judges; HEAD_CARD.md is written here
    live: tuple[str, ...] = ()  # live runs NAME=RUN_DIR (testbed.run output dirs), in the card's order
    table1: str | None = None  # a testbed.simulate output dir for the Table I analog (None: none)
    notes: str | None = None  # a hand-written Markdown file appended as the card's last section


def rel(path: str | Path) -> str:
    """A path relative to the repository where it lies inside it."""
    p = Path(path).resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(path)


def md(df: pd.DataFrame, digits: int = 3) -> str:
    """A DataFrame as a Markdown table."""
    df = df.round(digits)
    head = "| " + " | ".join(map(str, df.columns)) + " |\n| " + " | ".join("---" for _ in df.columns) + " |\n"
    return head + "".join("| " + " | ".join(map(str, r)) + " |\n" for r in df.itertuples(index=False))


def choices_section(res: Path) -> str:
    chosen = json.loads((res / "judges.json").read_text())
    cfg = json.loads((res / "config_judges.json").read_text())
    rows = [{"judge": n, "tau (dev rule)": c["tau"], "dev AUC": c["dev_auc"],
             "dev AUC (flip)": c.get("dev_flip_auc", ""), "tau on the good link": c.get("tau_good", c["tau"]),
             "gamma": c.get("gamma", ""), **dev_bound(c)}
            for n, c in chosen.items()]
    any_c = next(iter(chosen.values()))
    kinds = any_c.get("dev_kinds") or []
    split = (f"the prompts of the kinds {', '.join(kinds)} are dev (left out of training)" if kinds
             else f"every {cfg['dev_every']}-th prompt of each is dev")
    return (f"## Data and the dev rule\n\n{cfg['labelled']} labelled mismatches from {', '.join(any_c['run_dirs'])} "
            f"(harmful {cfg['harmful']:.1%}); {split} ({cfg['dev']} "
            f"mismatches), the rest train ({any_c['train']}). No test prompt is read. The rule, the same for every "
            f"judge: {any_c['rule']}.\n\n" + md(pd.DataFrame(rows)))


def dev_bound(c: dict) -> dict:
    """The bound rule's figures at the chosen tau (flips of accepted checkable dev mismatches and the upper bound)."""
    b, best = c.get("dev_bound"), c.get("dev_bound_best")
    if b:
        return {"dev flips / accepted": f"{b['flips']} / {b['accepted_checkable']}",
                "flip upper bound": round(b["flip_upper"], 4)}
    if best:  # no tau passed: the tightest bound any tau reached, and where
        return {"dev flips / accepted": f"none passes; tightest at tau {best['tau']:.4g}: "
                                        f"{best['flips']} / {best['accepted_checkable']}",
                "flip upper bound": round(best["flip_upper"], 4)}
    return {}


def curve_section(res: Path) -> str:
    curve = pd.read_csv(res / "judges_curve.csv")
    piv = curve.pivot(index="labels", columns="features", values="dev_auc")
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for col in piv.columns:
        ax.plot(piv.index, piv[col], marker="o", label=col)
    ax.set(xscale="log", xlabel="training labels", ylabel="dev AUC (harmful)", title="learning curve per feature set")
    ax.legend()
    fig.tight_layout()
    fig.savefig(res / "learning_curve.png", dpi=110)
    plt.close(fig)
    flip = (f"\nDev AUC on the flip label (the checkable dev mismatches that turn a right answer wrong):\n\n"
            f"{md(curve.pivot(index='labels', columns='features', values='dev_flip_auc').reset_index())}"
            if "dev_flip_auc" in curve else "")
    return ("## Learning curve per feature set (dev AUC on the harm label)\n\n`edge`: the edge's scalar features; "
            "`h_after`: the target's hidden state after the draft token; `hd_ht`: the drafter's and the target's "
            "hidden states (WISV, AutoJudge); `edge_sib`: `edge` with the sibling branch's three features (collect "
            f"--sibling).\n\n{md(piv.reset_index())}{flip}\n"
            f"![curve]({rel(res / 'learning_curve.png')})\n")


def signals_section(res: Path) -> str:
    """Each edge signal alone on dev (judges_signals.csv), and the protected prefix per N (judges_protect.csv)."""
    parts = []
    if (res / "judges_signals.csv").exists():
        parts.append("## Each edge signal alone on dev\n\nAUC of the signal as a score, on the harm label and on "
                     "the flip label among checkable dev mismatches (below 0.5: smaller values go with flips; "
                     "`out_pos` is where in the output the mismatch falls).\n\n"
                     + md(pd.read_csv(res / "judges_signals.csv")))
    if (res / "judges_protect.csv").exists():
        parts.append("## The protected prefix, chosen on dev\n\nOur judge never overrules the target on the "
                     "output's first N tokens; per N of the grid, its tau by the bound (at delta / grid size) and "
                     "the dev mismatches kept:\n\n" + md(pd.read_csv(res / "judges_protect.csv")))
    return "\n".join(parts)


def sweep_section(res: Path) -> str:
    sw = pd.read_csv(res / "judges_sweep.csv")
    chosen = json.loads((res / "judges.json").read_text())
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for name, g in sw.groupby("judge"):
        ax.plot(g["accepted_frac"], g["harmful_of_accepted"], marker=".", label=name)
    ax.set(xlabel="dev mismatches accepted", ylabel="harmful among accepted", title="tau sweep on dev (Fig. 3 analog)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(res / "fig3_dev_sweep.png", dpi=110)
    plt.close(fig)
    grid = sorted(sw["tau"].unique())
    pick = sw[sw["tau"].isin(grid[::6])]
    at = pd.DataFrame([sw[(sw.judge == n) & (sw.tau.round(4) == round(c["tau"], 4))].assign(chosen=True).iloc[0]
                       for n, c in chosen.items() if n in set(sw.judge) and c["tau"] > 0])
    return ("## tau sweep per judge on dev\n\nAt the chosen taus:\n\n" + (md(at) if len(at) else "(none)\n") +
            "\nAt a few taus:\n\n" +
            md(pick.pivot(index="tau", columns="judge", values="accepted_frac").reset_index()) +
            f"\n(accepted fraction of dev mismatches; `judges_sweep.csv` has the harmful fractions)\n\n"
            f"![sweep]({rel(res / 'fig3_dev_sweep.png')})\n")


def peers_section(res: Path) -> str:
    p = res / "peers.csv"
    if not p.is_file():
        return ""
    df = pd.read_csv(p)
    cols = ["judge", "protocol", "channel", "tau_in_force", "accuracy", "aal", "rounds_per_prompt", "tokens_per_prompt",
            "rounds_per_100_tokens", "accepted_mismatches_per_prompt", "matches_target", "drift_rouge_l",
            "fluency_ppl_ratio", "fluency_ext_ppl_ratio", "latency_s", "lost", "gained", "delta_ci_low",
            "delta_ci_high"]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    for ax, metric in zip(axes, ("aal", "accuracy")):
        sub = df[df.judge.isin(["greedy SD", "edge", "edge-blind"])].pivot(index="judge", columns="channel",
                                                                           values=metric)
        sub.plot.bar(ax=ax, rot=0, title=metric)
    fig.suptitle("CSI-aware (edge) vs CSI-blind (edge-blind) (Fig. 5 analog)")
    fig.tight_layout()
    fig.savefig(res / "fig5_csi_vs_blind.png", dpi=110)
    plt.close(fig)
    return ("## Peers in-process (held-out test prompts; latency predicted: Orin/A40 profiles)\n\n`lost`, `gained`: "
            "prompts right under greedy SD and wrong under the judge, and the other way round; `delta_ci_*`: the "
            "bootstrap 95% interval of the accuracy delta (paired by prompt).\n\n"
            + md(df[[c for c in cols if c in df]].sort_values(["channel", "judge"])) +
            f"\n![fig5]({rel(res / 'fig5_csi_vs_blind.png')})\n")


def live_section(live: tuple[str, ...]) -> str:
    if not live:
        return ""
    rows, paired = [], []
    for spec in live:
        name, _, run_dir = spec.partition("=")
        if not name or not (Path(run_dir) / "summary.csv").is_file():
            raise ValueError(f"--live {spec!r}: expected NAME=RUN_DIR, a testbed.run output directory with summary.csv")
        s = pd.read_csv(Path(run_dir) / "summary.csv")
        cfg = json.loads((Path(run_dir) / "config.json").read_text())
        for _, r in s.iterrows():
            rows.append({"run": name, "protocol": r["protocol"], "head": Path(str(cfg.get("head_resolved", ""))).name
                         or cfg.get("head_resolved"), **{c: r[c] for c in LIVE_COLS if c in r}})
        if (Path(run_dir) / "summary_by_group.csv").is_file():
            pp = Path(run_dir) / "paired.csv"
            rel_rows = relative_rows(pd.read_csv(Path(run_dir) / "summary_by_group.csv"),
                                     pd.read_csv(pp) if pp.is_file() else None)
            paired.append(rel_rows.assign(run=name)[["run", *RELATIVE_COLUMNS]])
    by_group = ("\n### By group of kinds, against the first protocol of each run (paired by prompt)\n\n"
                + md(pd.concat(paired, ignore_index=True)) if paired else "")
    return "## Live testbed runs\n\n" + md(pd.DataFrame(rows)) + by_group + "\n"


def table1_section(table1: str | None) -> str:
    if not table1:
        return ""
    csvs = sorted(Path(table1).glob("*.csv"))
    if not csvs:
        return ""
    df = pd.read_csv(csvs[0])
    return f"## Table I analog (simulator, `{rel(csvs[0])}`)\n\n" + md(df) + "\n"


def run(cfg: CardConfig) -> Path:
    """Write HEAD_CARD.md into the heads directory."""
    res = Path(cfg.results_dir)
    parts = ["# The SmolLM2 pair's judges: the edge judge (default) and its peers\n",
             "Made by `make head-smollm2` (commands in `Makefile`; stages in `labeling/judges.py`, "
             f"`labeling/peers.py`); result files in `{rel(res)}`.\n",
             choices_section(res), curve_section(res), signals_section(res), sweep_section(res), peers_section(res),
             live_section(cfg.live),
             table1_section(cfg.table1)]
    if cfg.notes:
        parts.append(Path(cfg.notes).read_text())
    out = Path(cfg.heads_dir) / "HEAD_CARD.md"
    out.write_text("\n".join(p for p in parts if p))
    print(f"card: {out}")
    return out

