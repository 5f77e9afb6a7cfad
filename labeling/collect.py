"""Stage 1 (collect): run greedy SD on calibration prompts and store every round's first mismatch.

Along the greedy path each round stops at its first mismatch, so these are exactly the mismatches the
decision head is asked about when it rejects everything.  Per mismatch (traces.npz, one row each):
``episode``, ``position`` (index of the mismatch in the generated tokens), ``round``, ``draft_id``,
``target_id``, ``h_d`` [N, d_d] and ``h_t`` [N, d_t] (fp16, the layer ``hidden_layer``), and what the edge knows
there for free (wisv/head/features.py): ``edge`` [N, S] (the scalar features, float32; the ``sib_*`` columns NaN
unless ``sibling`` recorded them) and ``h_after`` [N, d_t] (fp16, the target's hidden state after reading the draft
token).  Per prompt
(episodes.jsonl): prompt id and ids, reference answer, generated ids and text, the task outcome.
With ``workers`` > 1 the prompts are dealt round-robin to that many processes (one torch thread each, each with
its own copy of the pair) and their results merged in prompt order: the files equal a one-process run's.
"""
from __future__ import annotations

import multiprocessing as mp
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from labeling.config import CollectConfig
from labeling.store import EPISODES, TRACES, save_config, stage_path
from wisv.decoding.speculative import SpecOutput, speculative_generate
from wisv.models.loader import load_pair
from wisv.pairs import apply_pair
from wisv.tasks.datasets import check_dataset
from wisv.tasks.jsonl import write_jsonl
from wisv.tasks.prompts import prompt_rows


def episode_mismatches(out: SpecOutput) -> list[dict]:
    """The first mismatch of every round, with its position in the generated tokens."""
    rows, offset = [], 0
    for r in out.rounds:
        if r.mismatches and r.mismatches[0] < len(r.committed):
            j = r.mismatches[0]
            rows.append({"position": offset + j, "round": r.round, "draft_id": r.draft_tokens[j],
                         "target_id": r.target_argmax[j], "h_d": r.h_draft[0], "h_t": r.h_target[0],
                         "edge": r.edge.scalars[0].numpy(), "h_after": r.edge.h_after[0]})
        offset += len(r.committed)
    return rows


def collect_rows(cfg: CollectConfig, rows: list[dict],
                 desc: str = "collect (greedy SD)") -> tuple[list[dict], list[dict]]:
    """Greedy SD over rows: (one episode dict per row, one mismatch dict per first-of-round mismatch, h as fp16
    numpy, ``episode`` = the row's index in ``rows``)."""
    torch.set_num_threads(1)
    pair = load_pair(cfg.drafter, cfg.target, cfg.device)
    parts = [collect_one(cfg, pair, e, row) for e, row in enumerate(tqdm(rows, desc=desc))]
    return [ep for ep, _ in parts], [m for _, ms in parts for m in ms]


def collect_one(cfg: CollectConfig, pair, e: int, row: dict) -> tuple[dict, list[dict]]:
    """One row's greedy SD: its episode dict and its mismatch dicts (``episode`` = e)."""
    out = speculative_generate(pair.drafter, pair.target, row["prompt_ids"], max_new_tokens=cfg.max_new_tokens,
                               draft_len=cfg.draft_len, rule="greedy", hidden_layer=cfg.hidden_layer,
                               sibling=cfg.sibling)
    ms = episode_mismatches(out)
    mism = [{**m, "episode": e, "h_d": _half(m["h_d"]), "h_t": _half(m["h_t"]), "h_after": _half(m["h_after"])}
            for m in ms]
    episode = {**row, "episode": e, "output_ids": out.tokens, "text": pair.tokenizer.decode(out.tokens),
               "rounds": len(out.rounds), "mismatches": len(ms)}
    return episode, mism


_WORKER: dict = {}  # the worker process's config and pair (loaded once by _init_worker)


def _init_worker(cfg: dict) -> None:
    torch.set_num_threads(1)
    _WORKER["cfg"] = CollectConfig(**cfg)
    _WORKER["pair"] = load_pair(_WORKER["cfg"].drafter, _WORKER["cfg"].target, _WORKER["cfg"].device)


def _worker(job: tuple[int, dict]) -> tuple[dict, list[dict]]:
    return collect_one(_WORKER["cfg"], _WORKER["pair"], *job)


def collect_parallel(cfg: CollectConfig, rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """collect_rows over ``cfg.workers`` processes, each taking the next row when it is free (prompts differ in
    cost several-fold: a static split leaves one worker running long after the other), in row order."""
    n = min(cfg.workers, len(rows))
    if n <= 1:
        return collect_rows(cfg, rows)
    with mp.get_context("spawn").Pool(n, initializer=_init_worker, initargs=(asdict(cfg),)) as pool:
        parts = list(tqdm(pool.imap(_worker, enumerate(rows), chunksize=1), total=len(rows),
                          desc=f"collect ({n} workers)"))
    return [ep for ep, _ in parts], [m for _, ms in parts for m in ms]


def pick_rows(cfg: CollectConfig, rows: list[dict]) -> list[dict]:
    """The rows a collect run takes: past the first ``skip_prompts``, of ``kinds`` only (if any), the first
    ``prompts`` of those; ValueError when none is left."""
    kinds = set(cfg.kinds)
    picked = [r for r in rows[cfg.skip_prompts:] if not kinds or r.get("kind") in kinds][: cfg.prompts]
    if not picked:
        raise ValueError(f"no prompts left: {len(rows)} rows, --skip-prompts {cfg.skip_prompts}, "
                         f"--kinds {' '.join(cfg.kinds) or '(all)'}")
    return picked


def run(cfg: CollectConfig) -> Path:
    """Collect traces into cfg.run_dir; returns the traces file."""
    torch.set_num_threads(1)
    cfg = apply_pair(cfg, split="calib")
    if cfg.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {cfg.workers}")
    if cfg.dataset:
        check_dataset(cfg.dataset, cfg.prompts_file)  # a bad name or row: one line before any model loads
    tok = load_pair(cfg.drafter, cfg.target, cfg.device).tokenizer  # the workers load their own pair
    rows = pick_rows(cfg, prompt_rows(tok, "calib", None, cfg.prompts_file, chat_template=cfg.chat_template,
                                      dataset=cfg.dataset, first_turn_only=True))
    episodes, mism = collect_parallel(replace(cfg), rows)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not mism:
        raise ValueError("greedy SD produced no mismatches: nothing to label (drafter == target?)")
    np.savez_compressed(stage_path(run_dir, TRACES), **_arrays(mism))
    write_jsonl(stage_path(run_dir, EPISODES), episodes)
    save_config(run_dir, "collect", cfg, {"vocab_size": len(tok), "n_mismatches": len(mism)})
    print(f"collect: {len(episodes)} episodes, {len(mism)} mismatches "
          f"({len(mism) / len(episodes):.1f} per episode) -> {run_dir / TRACES}")
    return stage_path(run_dir, TRACES)


def _half(h: torch.Tensor) -> np.ndarray:
    return h.float().numpy().astype(np.float16)


def _arrays(mism: list[dict]) -> dict[str, np.ndarray]:
    ints = {k: np.array([m[k] for m in mism], np.int64)
            for k in ("episode", "position", "round", "draft_id", "target_id")}
    hd = np.stack([m["h_d"] for m in mism])  # [N, d_d] fp16
    ht = np.stack([m["h_t"] for m in mism])  # [N, d_t] fp16
    edge = np.stack([m["edge"] for m in mism]).astype(np.float32)  # [N, S]
    h_after = np.stack([m["h_after"] for m in mism])  # [N, d_t] fp16
    return {**ints, "h_d": hd, "h_t": ht, "edge": edge, "h_after": h_after}
