"""Stage 6 (export): copy the trained CSI-aware head to a directory the edge loads, at evaluate's chosen tau,
with its card (HEAD_CARD.md) and the evidence it rests on (headline.json, evaluate.csv, the plots)."""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from labeling.store import EVAL_CSV, HEADS, LABELS, load_config, require
from wisv.head.store import load_head, save_head

EVIDENCE = ("headline.json", EVAL_CSV, "accuracy_vs_tau.png", "aal_vs_tau.png", "train_csi.png", "train_nocsi.png",
            "fig3_accuracy_vs_tau.png", "fig5_csi_vs_blind.png", "learning_curve.csv", "learning_curve.png",
            "label_summary.csv", "offline_sweep.csv")


@dataclass
class ExportConfig:
    """Where the head comes from and where it goes."""

    run_dir: str = "runs/labeling"  # a run directory with train and evaluate done
    to: str = "runs/labeling/export"  # destination head directory (e.g. wisv/assets/toy-pair/head)
    variant: str = "csi"  # which trained head to export


def card(headline: dict, configs: dict[str, dict]) -> str:
    """Markdown card of the head's numbers (from headline.json) and how it was made."""
    h = headline
    lines = ["# WISV decision head", "",
             f"Chosen tau **{h['tau']}**: the largest swept tau <= {configs['evaluate']['tau_max']} "
             f"(the class-balanced decision boundary) whose {h['poor_channel']}-channel accuracy stays within "
             f"{configs['evaluate']['max_acc_drop_pts']} point of greedy SD (the accuracy bound alone allows up to "
             f"{h['largest_tau_within_accuracy']}), at K = {h['draft_len']} on {configs['evaluate']['prompts']} "
             "held-out test prompts.", "",
             "| head | channel | accuracy | AAL | AAL vs greedy | rounds/prompt | rounds vs greedy "
             "| predicted latency vs greedy |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |",
             f"| greedy SD | any | {h['greedy_accuracy']:.3f} | {h['greedy_aal']:.2f} | | "
             f"{h['greedy_rounds_per_prompt']:.2f} | | |"]
    for key in ("csi_poor", "csi_good", "nocsi_poor", "nocsi_good"):
        if key in h:
            r, (variant, ch) = h[key], key.split("_")
            lines.append(f"| {'CSI-aware' if variant == 'csi' else 'no-CSI ablation'} | {ch} | {r['accuracy']:.3f} | "
                         f"{r['aal']:.2f} | {r['aal_gain']:+.1%} | {r['rounds_per_prompt']:.2f} | "
                         f"{r['rounds_change']:+.1%} | {r['latency_change']:+.1%} |")
    if any("fluency_ppl_ratio" in h.get(k, {}) for k in ("csi_poor", "csi_good")):
        lines += ["", "Text against the target's own output (greedy SD's) at the chosen tau: matches_target, drift = "
                      "ROUGE-L F1, fluency = the target's perplexity ratio.", "",
                  "| head | channel | matches_target | drift (ROUGE-L F1) | fluency (ppl ratio) "
                  "| accepted mismatches/prompt |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for key in ("csi_poor", "csi_good", "nocsi_poor", "nocsi_good"):
            if key in h and "fluency_ppl_ratio" in h[key]:
                r, (variant, ch) = h[key], key.split("_")
                lines.append(f"| {'CSI-aware' if variant == 'csi' else 'no-CSI ablation'} | {ch} | "
                             f"{r['matches_target']:.3f} | {r['drift_rouge_l']:.3f} | {r['fluency_ppl_ratio']:.3f} | "
                             f"{r['accepted_mismatches_per_prompt']:.2f} |")
    o = h.get("overhead", {})
    if o:
        lines += ["", f"Overhead: {o['head_flops_per_query']:.3g} FLOPs per queried mismatch, "
                      f"{o['flops_ratio']:.2%} of one target verification pass ({o['verify_block_tokens']} tokens "
                      f"at prefix {o['prefix_tokens']}); measured {o['head_s'] * 1e6:.0f} us "
                      f"vs {o['verify_s'] * 1e3:.2f} ms ({o['time_ratio']:.1%}) on this CPU."]
    ch = configs["evaluate"]["channels"]
    lines += ["", "Channels: " + ", ".join(f"{k} = {v[0]:g} Mbit/s, {v[1]:g} ms RTT" for k, v in ch.items()) + ". "
              "Predicted latency: wisv.timing.roundtime with the pair's dimensions on the "
              f"{configs['evaluate']['ue_profile']} / {configs['evaluate']['edge_profile']} profiles, "
              f"{configs['evaluate']['protocol']} payloads (greedy SD with greedy payloads).",
              "", "Made by `python -m labeling` (collect, label, relabel, train, evaluate, export); the stage configs "
              "are in configs.json beside this card."]
    return "\n".join(lines) + "\n"


def label_table(labels: pd.DataFrame) -> pd.DataFrame:
    """Per mismatch kind and overall: count, harmful (turns wrong, disfluent), helpful and either-direction rates."""
    cols = ["harmful", "turns_wrong", "disfluent", "helpful", "changed"]
    per = labels.groupby("kind")[cols].mean()
    per.insert(0, "n", labels.groupby("kind").size())
    per.loc["all"] = [len(labels), *labels[cols].mean()]
    per["n"] = per["n"].astype(int)
    return per


def rel(path: str | None) -> str | None:
    """A path relative to the repository where it lies inside it (the card never names this machine's folders)."""
    if path is None:
        return None
    repo, p = Path(__file__).resolve().parents[1], Path(path).resolve()
    return str(p.relative_to(repo)) if p.is_relative_to(repo) else str(path)


def evidence_section(run_dir: Path, configs: dict[str, dict]) -> str:
    """The card's data and evidence: label counts by kind, the learning curve and the figures."""
    labels = pd.read_csv(run_dir / LABELS)
    lab = label_table(labels)
    lab.to_csv(run_dir / "label_summary.csv")
    lc = configs["label"]
    lines = ["", "## Labels", "",
             f"{len(labels)} labelled mismatches from {labels['episode'].nunique()} calibration prompts "
             f"(collect: {configs['collect']['prompts']} prompts of `{rel(configs['collect'].get('prompts_file'))}`, "
             f"K = {configs['collect']['draft_len']}, {configs['collect']['max_new_tokens']} new tokens). Harmful = "
             f"forcing the draft turns a right answer wrong, or the forced token and its continuation are more than "
             f"{lc['max_ppl_ratio']}x as perplexing to the target as its own tokens over {lc['fluency_window']} tokens "
             f"(disfluent). Helpful = turns a wrong answer right (never harmful). Changed = the earlier "
             f"either-direction label. {int(labels['harmful'].sum())} harmful, {int(labels['helpful'].sum())} helpful.",
             "", "| kind | n | harmful | turns wrong | disfluent | helpful | changed (either way) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {k} | {int(r.n)} | {r.harmful:.3f} | {r.turns_wrong:.3f} | {r.disfluent:.3f} | {r.helpful:.3f} | "
              f"{r.changed:.3f} |" for k, r in lab.iterrows()]
    if (run_dir / "learning_curve.csv").exists():
        lc_df = pd.read_csv(run_dir / "learning_curve.csv")
        if "features" not in lc_df:
            lc_df["features"] = "hidden"
        lines += ["", "## Learning curve", "", "Held-out AUC on the harmful label (no-CSI head trained on a = y, "
                  "test episodes never trained on) against labelled training mismatches ([plot](learning_curve.png)). "
                  "Inputs: hidden = the head's [h_d ; h_t]; edge = the target's NLL of the draft token, of its own "
                  "token, and their difference (a feature ablation, not the shipped head's input):",
                  "", "| inputs | training mismatches | harmful among them | held-out mismatches | held-out AUC |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {r.features} | {int(r.n_train)} | {int(r.harmful_train)} | {int(r.n_test)} | {r.auc:.3f} |"
                  for r in lc_df.itertuples()]
    if (run_dir / "offline_sweep.csv").exists():
        off = pd.read_csv(run_dir / "offline_sweep.csv")
        n, harm = int(off["mismatches"].iloc[0]), int(off["harmful"].iloc[0])
        lines += ["", "## Offline check", "", f"What each head accepts (p < tau) of {n} held-out labelled mismatches "
                  f"({harm} harmful; the train stage's validation episodes, which chose its epoch), by label "
                  "([offline_sweep.csv](offline_sweep.csv)):", "",
                  "| head | channel | tau | accepted | of harmful | of helpful | of harmless |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {'CSI-aware' if r.variant == 'csi' else 'no-CSI ablation'} | {r.channel} | {r.tau:g} | "
                  f"{r.accepted:.3f} | {r.accepted_harmful:.3f} | {r.accepted_helpful:.3f} | "
                  f"{r.accepted_harmless:.3f} |"
                  for r in off.itertuples()]
    lines += ["", "Figures: [Fig. 3 analog, accuracy vs tau per channel](fig3_accuracy_vs_tau.png); "
              "[Fig. 5 analog, CSI-aware vs CSI-blind](fig5_csi_vs_blind.png); [evaluate.csv](evaluate.csv)."]
    return "\n".join(lines) + "\n"


def run(cfg: ExportConfig) -> Path:
    headline = json.loads(require(cfg.run_dir, "headline.json", "evaluate").read_text())
    if headline.get("tau") is None:
        raise ValueError(f"evaluate chose no tau ({headline.get('note')}); nothing to export")
    head = load_head(require(cfg.run_dir, HEADS, "train", variant=cfg.variant))
    head.cfg = replace(head.cfg, tau=headline["tau"])
    out = save_head(head, cfg.to)
    configs = {s: load_config(cfg.run_dir, s)
               for s in ("collect", "label", "relabel", f"train_{cfg.variant}", "evaluate")}
    (out / "configs.json").write_text(json.dumps(configs, indent=1))
    section = evidence_section(Path(cfg.run_dir), configs) if "harmful" in pd.read_csv(
        require(cfg.run_dir, LABELS, "label"), nrows=1) else ""
    for name in EVIDENCE:
        src = Path(cfg.run_dir) / name
        if src.exists():
            shutil.copy(src, out / name)
    (out / "HEAD_CARD.md").write_text(card(headline, configs) + section)
    print(f"export: {cfg.variant} head at tau={headline['tau']} -> {out}")
    return out
