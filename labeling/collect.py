"""Stage 1 (collect): run greedy SD on calibration prompts and store every round's first mismatch.

Along the greedy path each round stops at its first mismatch, so these are exactly the mismatches the
decision head is asked about when it rejects everything.  Per mismatch (traces.npz, one row each):
``episode``, ``position`` (index of the mismatch in the generated tokens), ``round``, ``draft_id``,
``target_id``, ``h_d`` [N, d_d] and ``h_t`` [N, d_t] (fp16, the layer ``hidden_layer``).  Per prompt
(episodes.jsonl): prompt id and ids, reference answer, generated ids and text, the task outcome.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from labeling.config import CollectConfig
from labeling.store import EPISODES, TRACES, save_config, stage_path
from wisv.tasks.jsonl import write_jsonl
from wisv.models.loader import load_pair
from wisv.tasks.prompts import prompt_rows
from wisv.decoding.speculative import SpecOutput, speculative_generate
from wisv.pairs import apply_pair


def episode_mismatches(out: SpecOutput) -> list[dict]:
    """The first mismatch of every round, with its position in the generated tokens."""
    rows, offset = [], 0
    for r in out.rounds:
        if r.mismatches and r.mismatches[0] < len(r.committed):
            j = r.mismatches[0]
            rows.append({"position": offset + j, "round": r.round, "draft_id": r.draft_tokens[j],
                         "target_id": r.target_argmax[j], "h_d": r.h_draft[0], "h_t": r.h_target[0]})
        offset += len(r.committed)
    return rows


def run(cfg: CollectConfig) -> Path:
    """Collect traces into cfg.run_dir; returns the traces file."""
    torch.set_num_threads(1)
    cfg = apply_pair(cfg, split="calib")
    pair = load_pair(cfg.drafter, cfg.target, cfg.device)
    rows = prompt_rows(pair.tokenizer, "calib", cfg.prompts, cfg.prompts_file, need_answers=True,
                       chat_template=cfg.chat_template)
    episodes, mism = [], []
    for e, row in enumerate(tqdm(rows, desc="collect (greedy SD)")):
        out = speculative_generate(pair.drafter, pair.target, row["prompt_ids"], max_new_tokens=cfg.max_new_tokens,
                                   draft_len=cfg.draft_len, rule="greedy", hidden_layer=cfg.hidden_layer)
        ms = episode_mismatches(out)
        mism += [{**m, "episode": e} for m in ms]
        episodes.append({**row, "episode": e, "output_ids": out.tokens, "text": pair.tokenizer.decode(out.tokens),
                         "rounds": len(out.rounds), "mismatches": len(ms)})
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not mism:
        raise ValueError("greedy SD produced no mismatches: nothing to label (drafter == target?)")
    np.savez_compressed(stage_path(run_dir, TRACES), **_arrays(mism))
    write_jsonl(stage_path(run_dir, EPISODES), episodes)
    save_config(run_dir, "collect", cfg, {"vocab_size": len(pair.tokenizer), "n_mismatches": len(mism)})
    print(f"collect: {len(episodes)} episodes, {len(mism)} mismatches "
          f"({len(mism) / len(episodes):.1f} per episode) -> {run_dir / TRACES}")
    return stage_path(run_dir, TRACES)


def _arrays(mism: list[dict]) -> dict[str, np.ndarray]:
    ints = {k: np.array([m[k] for m in mism], np.int64) for k in ("episode", "position", "round", "draft_id", "target_id")}
    hd = torch.stack([m["h_d"] for m in mism]).float().numpy().astype(np.float16)  # [N, d_d]
    ht = torch.stack([m["h_t"] for m in mism]).float().numpy().astype(np.float16)  # [N, d_t]
    return {**ints, "h_d": hd, "h_t": ht}
