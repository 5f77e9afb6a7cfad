"""Prompts of a run (built-in test split or a JSONL file) and the target-only greedy reference outputs."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm
from transformers import AutoTokenizer

from wisv.evaluate import greedy_reference
from wisv.jsonl import write_jsonl
from wisv.models import builtin_paths, default_dtype, load_model
from wisv.prompts import prompt_rows


def _target_dir(cfg) -> Path:
    return Path(cfg.edge.target) if cfg.edge.target else builtin_paths()[1]


def load_prompts(cfg, out_file: Path) -> tuple[pd.DataFrame, object]:
    """Resolve the run's prompts, write them as JSONL (prompt_id, prompt_ids, answer) and return them."""
    tok = AutoTokenizer.from_pretrained(_target_dir(cfg))
    rows = prompt_rows(tok, "test", cfg.prompts, cfg.prompts_file)
    write_jsonl(out_file, rows)
    return pd.DataFrame(rows), tok


def reference_outputs(cfg, prompts: pd.DataFrame, out_file: Path) -> dict[str, list[int]]:
    """Target-only greedy outputs (what lossless protocols must reproduce), saved as JSONL."""
    torch.set_num_threads(1)
    target = load_model(_target_dir(cfg), "target", cfg.device, default_dtype(cfg.device))
    refs = {}
    for pid, ids in tqdm(list(zip(prompts["prompt_id"], prompts["prompt_ids"])), desc="target-only reference"):
        refs[pid] = greedy_reference(target, list(ids), cfg.ue.max_new_tokens)
    write_jsonl(out_file, ({"prompt_id": k, "tokens": v} for k, v in refs.items()))
    del target
    return refs
