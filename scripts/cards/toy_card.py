"""Measure the shipped toy pair and write MODEL_CARD.md and card.json next to the weights.

Usage: ``python -m scripts.cards.toy_card [--dir wisv/assets/toy-pair] [--n-acc 300] [--n-sd 200]``
"""
from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

import config
from wisv.decoding.speculative import spec_rows, speculative_generate
from wisv.models.loader import load_pair
from wisv.records.rows import to_frame
from wisv.records.summary import summarize_rounds
from wisv.tasks.evaluate import accuracy, greedy_reference, mismatch_kind
from wisv.tasks.prompts import encode_prompt
from wisv.tasks.toydata import load_split

ROOT = Path(__file__).resolve().parents[2]

DRAFT_LENS = (4, 8, 16)


@dataclass
class CardConfig:
    """One model card (saved beside card.json as card_config.toml)."""

    markdown_only: bool = False  # rewrite MODEL_CARD.md from card.json, measuring nothing
    dir: str = str(ROOT / "wisv/assets/toy-pair")  # the pair's directory (drafter/, target/; the card goes here)
    n_acc: int = 300  # test problems for each model's accuracy
    n_sd: int = 200  # test problems for greedy SD's AAL per K


def _dir_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.glob("*.safetensors")) / 2**20, 2)


def measure(root: Path, n_acc: int, n_sd: int) -> dict:
    """Accuracy of each model, greedy-SD AAL per K, first-mismatch kinds, sizes."""
    drafter, target, tok = load_pair(root / "drafter", root / "target")
    probs = load_split("test", max(n_acc, n_sd))
    prompts = [encode_prompt(tok, p.prompt) for p in probs]
    refs, res = {}, {}
    for name, model in (("target", target), ("drafter", drafter)):
        outs = [greedy_reference(model, ids) for ids in tqdm(prompts[:n_acc], desc=f"{name} greedy")]
        refs[name] = outs
        res[f"{name}_accuracy"] = accuracy([tok.decode(o) for o in outs], [p.answer for p in probs[:n_acc]])
    kinds = collections.Counter()
    for k in DRAFT_LENS:
        records, lens, same = [], [], 0
        for i, ids in enumerate(tqdm(prompts[:n_sd], desc=f"greedy SD K={k}")):
            out = speculative_generate(drafter, target, ids, max_new_tokens=160, draft_len=k)
            records, lens = records + spec_rows(out, str(i), len(ids)), lens + [len(out.tokens)]
            same += out.tokens == (refs["target"][i] if i < n_acc else greedy_reference(target, ids))
            if k == 8:
                kinds.update(mismatch_kind(tok, r.draft_tokens[r.mismatches[0]], r.target_argmax[r.mismatches[0]])
                             for r in out.rounds if r.mismatches)
        s = summarize_rounds(to_frame(records), pd.DataFrame({"n_tokens": lens}))
        res[f"aal_k{k}"] = round(s["aal"], 3)
        res[f"rounds_per_prompt_k{k}"] = round(s["rounds_per_prompt"], 2)
        res[f"matches_target_k{k}"] = same / n_sd
    total = sum(kinds.values())
    res["first_mismatch_kinds_k8"] = {k: round(v / total, 3) for k, v in sorted(kinds.items())}
    for name, model in (("target", target), ("drafter", drafter)):
        res[f"{name}_params"] = sum(p.numel() for p in model.parameters())
        res[f"{name}_file_mb"] = _dir_mb(root / name)
        res[f"{name}_config"] = {k: getattr(model.config, k) for k in
                                 ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")}
    res.update(vocab_size=len(tok), n_accuracy_problems=n_acc, n_sd_problems=n_sd, torch=torch.__version__)
    return res


def card_markdown(r: dict, root: Path) -> str:
    logs = {n: json.loads((root / n / "train_log.json").read_text()) for n in ("target", "drafter")
            if (root / n / "train_log.json").exists()}
    lines = ["# Built-in toy pair", "",
             "Llama-architecture target and drafter sharing one byte-level BPE tokenizer (digits are single tokens),",
             "trained by `scripts/train/toy_pair.py` on the toy arithmetic task in `wisv/tasks/toydata.py`.",
             "Numbers below are measured on the shipped fp16 weights (loaded as fp32 on CPU) by "
             "`scripts/cards/toy_card.py`.",
             "", "| | target | drafter |", "| --- | --- | --- |",
             f"| accuracy on {r['n_accuracy_problems']} test problems | {r['target_accuracy']:.1%} | "
             f"{r['drafter_accuracy']:.1%} |",
             f"| parameters | {r['target_params']:,} | {r['drafter_params']:,} |",
             f"| weights file (fp16) | {r['target_file_mb']} MB | {r['drafter_file_mb']} MB |",
             f"| width / layers / heads / d_ff | {'/'.join(str(v) for v in r['target_config'].values())} | "
             f"{'/'.join(str(v) for v in r['drafter_config'].values())} |"]
    train = {n: f"{g['spec']['steps']} steps x {g['spec']['batch_size']}, final loss {g['train_log'][-1]['loss']}, "
                f"{g['train_time_s'] / 60:.1f} min" for n, g in logs.items()}
    if train:
        lines.append(f"| training | {train.get('target', '')} | {train.get('drafter', '')} |")
        style = {n: "per-problem style (80%)" if g["spec"].get("style_follow", 0.8) is not None else
                 "wording drawn per slot (no per-problem style)" for n, g in logs.items()}
        lines.append(f"| training data wording | {style.get('target', '')} | {style.get('drafter', '')} |")
    lines += ["", f"Greedy speculative decoding on {r['n_sd_problems']} test problems:", "",
              "| K | AAL | rounds / prompt | output == target greedy |", "| --- | --- | --- | --- |"]
    lines += [f"| {k} | {r[f'aal_k{k}']} | {r[f'rounds_per_prompt_k{k}']} | {r[f'matches_target_k{k}']:.1%} |"
              for k in DRAFT_LENS]
    kinds = ", ".join(f"{k} {v:.0%}" for k, v in r["first_mismatch_kinds_k8"].items())
    lines += ["", f"First mismatch per round at K=8: {kinds}.", f"Vocabulary: {r['vocab_size']} tokens.", ""]
    return "\n".join(lines)


def write_card(root: Path, n_acc: int = 300, n_sd: int = 200) -> dict:
    res = measure(root, n_acc, n_sd)
    (root / "card.json").write_text(json.dumps(res, indent=1))
    (root / "MODEL_CARD.md").write_text(card_markdown(res, root))
    print(card_markdown(res, root))
    return res


def parse_args(argv: list[str] | None = None) -> CardConfig:
    return config.parse(CardConfig, argv, prog="python -m scripts.cards.toy_card", description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    root = Path(args.dir)
    if args.markdown_only:
        (root / "MODEL_CARD.md").write_text(card_markdown(json.loads((root / "card.json").read_text()), root))
        return
    torch.set_num_threads(2)
    write_card(root, args.n_acc, args.n_sd)
    config.write_config_beside(root / "card.json", args, config.provenance())


if __name__ == "__main__":
    main()
