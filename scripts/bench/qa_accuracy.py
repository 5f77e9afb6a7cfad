"""Target-only greedy accuracy on the QA task's splits or the long-form task's pools, overall and per kind (a JSON).

Usage: ``python -m scripts.bench.qa_accuracy --target DIR [--gguf FILE] [--splits calib test] [--n 50]
[--out runs/smollm2/qa_accuracy.json]``

``--target`` is an HF model directory, or with ``--gguf`` the directory holding that GGUF file (transformers
dequantizes it).  Prompts go through ``wisv.tasks.prompts.read_jsonl_prompts`` (the chat template, as every CLI renders
them), outputs through ``wisv.tasks.qa.check_answer``; every output is written to ``<out stem>_outputs.jsonl``.
"""
from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

import config
from labeling.label import batched_greedy
from wisv.tasks.evaluate import eos_id, greedy_reference
from wisv.tasks.jsonl import read_jsonl, write_jsonl
from wisv.tasks.pools import POOLS
from wisv.tasks.prompts import read_jsonl_prompts
from wisv.tasks.qa import QA_DIR, SPLITS, check_answer


@dataclass
class QAAccuracyConfig:
    """One measurement (written into the JSON and beside it as <out stem>_config.toml)."""

    target: str = ""  # target model directory (HF), or the directory of --gguf
    gguf: str | None = None  # GGUF file name inside --target (None: --target is an HF directory)
    splits: list[str] = field(default_factory=lambda: list(SPLITS), metadata={"choices": tuple(dict.fromkeys(
        SPLITS + POOLS))})  # splits measured (the long-form task's pools: distill, calib, test)
    qa_dir: str = str(QA_DIR)  # directory holding <split>.jsonl (wisv/assets/longform: the long-form task)
    n: int | None = None  # first n rows of each split (None: all)
    max_new_tokens: int = 32  # greedy output budget per question, tokens
    batch: int = 16  # questions of similar length decoded together, left-padded (1: one by one, unpadded)
    threads: int = 1  # torch intra-op threads
    out: str = "runs/smollm2/qa_accuracy.json"  # the results JSON, outputs beside it (committed: results/smollm2/)


def load_target(cfg: QAAccuracyConfig):
    """The target model (eval mode, float32) and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    kw = {"gguf_file": cfg.gguf} if cfg.gguf else {}
    tok = AutoTokenizer.from_pretrained(cfg.target, **kw)
    model = AutoModelForCausalLM.from_pretrained(cfg.target, dtype=torch.float32, **kw)
    return model.eval(), tok


def score(rows: list[dict], texts: list[str]) -> dict:
    """Overall and per-kind accuracy of outputs against the rows' accepted answers."""
    ok = [check_answer(t, r["answer"]) for r, t in zip(rows, texts)]
    kinds: dict[str, list[bool]] = defaultdict(list)
    for r, k in zip(rows, ok):
        kinds[r["kind"]].append(k)
    return {"n": len(ok), "accuracy": sum(ok) / max(1, len(ok)),
            "per_kind": {k: {"n": len(v), "accuracy": sum(v) / len(v)} for k, v in sorted(kinds.items())}}


def greedy_outputs(model, tok, rows: list[dict], cfg: QAAccuracyConfig) -> list[list[int]]:
    """Target-only greedy outputs of every row, in row order: one by one, or in batches of similar prompt length."""
    if cfg.batch <= 1:
        return [greedy_reference(model, r["prompt_ids"], cfg.max_new_tokens) for r in tqdm(rows, desc="greedy")]
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]["prompt_ids"]))
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos_id(model)
    outs: dict[int, list[int]] = {}
    for b in tqdm(range(0, len(order), cfg.batch), desc="greedy (batched)"):
        idx = order[b:b + cfg.batch]
        outs |= dict(zip(idx, batched_greedy(model, [rows[i]["prompt_ids"] for i in idx], cfg.max_new_tokens, pad)))
    return [outs[i] for i in range(len(rows))]


def run_split(model, tok, path: Path, cfg: QAAccuracyConfig) -> tuple[dict, list[dict]]:
    """Greedy outputs of one split: its score and one output row per question."""
    rows = read_jsonl_prompts(path, tok)[:cfg.n]
    kinds = {r["prompt_id"]: r["kind"] for r in read_jsonl(path)}
    texts = [tok.decode(o, skip_special_tokens=True) for o in greedy_outputs(model, tok, rows, cfg)]
    rows = [{**r, "kind": kinds[r["prompt_id"]]} for r in rows]
    outs = [{"prompt_id": r["prompt_id"], "kind": r["kind"], "answer": r["answer"], "output": t,
             "correct": check_answer(t, r["answer"])} for r, t in zip(rows, texts)]
    return score(rows, texts), outs


def parse_args(argv: list[str] | None = None) -> QAAccuracyConfig:
    return config.parse(QAAccuracyConfig, argv, prog="python -m scripts.bench.qa_accuracy",
                        description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_args(argv)
    if not cfg.target:
        raise SystemExit("qa_accuracy: --target DIR is required (an HF directory, or the directory of --gguf FILE)")
    torch.set_num_threads(cfg.threads)
    model, tok = load_target(cfg)
    t0, res, outs = time.perf_counter(), {}, []
    for split in cfg.splits:
        res[split], o = run_split(model, tok, Path(cfg.qa_dir) / f"{split}.jsonl", cfg)
        outs += [{"split": split, **r} for r in o]
        print(f"{split}: target-only accuracy {res[split]['accuracy']:.1%} on {res[split]['n']} questions")
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"target": cfg.target, "gguf": cfg.gguf, "max_new_tokens": cfg.max_new_tokens, "threads": cfg.threads,
              "wall_s": round(time.perf_counter() - t0, 1), "splits": res, "config": config.to_dict(cfg),
              **config.provenance()}
    out.write_text(json.dumps(result, indent=1))
    write_jsonl(out.with_name(f"{out.stem}_outputs.jsonl"), outs)
    config.write_config_beside(out, cfg, config.provenance())
    return result


if __name__ == "__main__":
    main()
