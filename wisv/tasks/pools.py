"""Prompt pools that must never share a prompt: the long-form task's drafter-distillation, head-calibration and test
pools (``wisv/assets/longform/{distill,calib,test}.jsonl``), and the generic held-out prompts.

A prompt is compared by ``normalise_prompt`` (case, punctuation and spacing do not make two prompts different).
Pure: no torch."""
from __future__ import annotations

import re
from itertools import combinations
from pathlib import Path

from wisv.tasks.jsonl import read_jsonl

ASSETS = Path(__file__).resolve().parents[1] / "assets"
LONGFORM_DIR = ASSETS / "longform"
POOLS = ("distill", "calib", "test")  # drafter distillation, decision-head calibration, evaluation
GENERIC_HELDOUT = ASSETS / "smollm2-drafter" / "heldout.jsonl"  # generic prompts no drafter is trained on
MAGPIE = ASSETS / "magpie" / "prompts.jsonl"  # prompts sampled from the SmolLM2 target (scripts/train/magpie.py)
MAGPIE_QUESTIONS = ASSETS / "magpie-questions" / "prompts.jsonl"  # short questions sampled from it, steered, with
#   the suite's answer-first and answer-last form instructions appended (each row's "turn" is the sampled question)
_WORD_RE = re.compile(r"[^\W_]+")


def normalise_prompt(text: str) -> str:
    """Lower-cased words joined by single spaces: 'What is 3 + 4?' and 'what is 3+4' are one prompt."""
    return " ".join(_WORD_RE.findall(text.lower()))


def pool_path(pool: str) -> Path:
    """The shipped JSONL of a long-form pool."""
    if pool not in POOLS:
        raise ValueError(f"long-form pool {pool!r}: expected one of {POOLS}")
    return LONGFORM_DIR / f"{pool}.jsonl"


def load_pool(pool: str, n: int | None = None) -> list[dict]:
    """The first ``n`` rows (all if None) of a long-form pool: prompt_id, kind, form, prompt, answers, raw."""
    return read_jsonl(pool_path(pool))[:n]


def overlaps(pools: dict[str, list[str]]) -> list[tuple[str, str, str]]:
    """Every (pool a, pool b, normalised prompt) that two of the named prompt lists share."""
    norm = {name: {normalise_prompt(p) for p in prompts} for name, prompts in pools.items()}
    return [(a, b, p) for a, b in combinations(norm, 2) for p in sorted(norm[a] & norm[b])]
