"""What the SmolLM2 drafter is distilled on, and what it must never read.

Sources, in this order, each with its own generation length:

- **generic**: free-text instructions and questions (scripts/data/smollm2_distill_prompts.py, a seeded prefix);
- **longform**: the long-form task's distill pool (``wisv/assets/longform/distill.jsonl``, the five geography kinds);
- **suite**: the broad task suite's question distill pool (``wisv/assets/suite/distill.jsonl``: seen kinds, both
  forms, answer first and answer last);
- **free**: the suite's free-form distill pool (``wisv/assets/suite/free_distill.jsonl``: seen kinds);
- **magpie** (``--magpie-rows``, none by default): prompts of any kind sampled from the target itself
  (``wisv/assets/magpie/prompts.jsonl``, scripts/train/magpie.py; none shares a run of 6 words with a held-out pool);
- **qa** (optional): the old QA task's in-domain prompts (scripts/data/smollm2_qa_distill_prompts.py).

Never read: the suite's and the long-form task's calib and test pools, and the generic held-out set
(``HELD_OUT``).  ``check_held_out`` refuses a prompt list that shares a prompt with any of them (compared by
``normalise_prompt``), and ``seen_rows`` refuses a suite row of a dev or unseen kind.  Pure: no torch."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scripts.data.smollm2_distill_prompts import distill_prompts
from scripts.data.smollm2_qa_distill_prompts import qa_distill_prompts
from wisv.tasks import suite
from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.pools import GENERIC_HELDOUT, LONGFORM_DIR, MAGPIE, normalise_prompt

HELD_OUT: dict[str, Path] = {  # every pool no drafter may be distilled on, by name
    "suite calib": suite.pool_path("calib"), "suite test": suite.pool_path("test"),
    "suite free calib": suite.pool_path("calib", "free"), "suite free test": suite.pool_path("test", "free"),
    "long-form calib": LONGFORM_DIR / "calib.jsonl", "long-form test": LONGFORM_DIR / "test.jsonl",
    "generic held-out": GENERIC_HELDOUT}


@dataclass(frozen=True)
class Source:
    """One set of distillation prompts and how long the target's greedy generation of each is."""

    name: str  # names the source in logs and its generation cache file
    prompts: list[str]  # prompt texts, in order
    max_new_tokens: int  # target greedy generation length per prompt, tokens


def held_out_prompts() -> dict[str, str]:
    """Normalised prompt -> the held-out pool it is in."""
    return {normalise_prompt(r["prompt"]): name for name, path in HELD_OUT.items() for r in read_jsonl(path)}


def check_held_out(prompts: list[str]) -> None:
    """Raise ValueError if any prompt is in a held-out pool (calib, test, generic held-out)."""
    held = held_out_prompts()
    bad = [(p, held[normalise_prompt(p)]) for p in prompts if normalise_prompt(p) in held]
    if bad:
        raise ValueError(f"{len(bad)} distillation prompts are in held-out pools, e.g. {bad[:3]}")


def seen_rows(rows: list[dict]) -> list[dict]:
    """The rows, after checking each is of a seen kind (the suite's distill pools hold no other)."""
    bad = sorted({r["kind"] for r in rows if suite.role(r["kind"]) != "seen"})
    if bad:
        raise ValueError(f"distillation rows of kinds that are not seen: {bad}")
    return rows


def sources(cfg) -> list[Source]:
    """The distillation sources of a DistillConfig (zero rows drops a source; the pools' rows are spread over their
    kinds, so a prefix keeps every kind), checked against the held-out pools."""
    out = [Source("generic", distill_prompts(cfg.prompts, cfg.seed), cfg.max_new_tokens),
           Source("longform", [r["prompt"] for r in read_jsonl(LONGFORM_DIR / "distill.jsonl")][:_n(cfg.pool_rows)],
                  cfg.pool_max_new_tokens),
           Source("suite", [r["prompt"] for r in seen_rows(suite.load_suite("distill", n=_n(cfg.suite_rows)))],
                  cfg.suite_max_new_tokens),
           Source("free", [r["prompt"] for r in seen_rows(suite.load_suite("distill", "free", n=_n(cfg.free_rows)))],
                  cfg.free_max_new_tokens)]
    if cfg.magpie_rows:
        out.append(Source("magpie", [r["prompt"] for r in read_jsonl(MAGPIE)][:_n(cfg.magpie_rows)],
                          cfg.magpie_max_new_tokens))
    if cfg.qa:
        out.append(Source("qa", qa_distill_prompts(cfg.seed), cfg.qa_max_new_tokens))
    out = [s for s in out if s.prompts]
    check_held_out([p for s in out for p in s.prompts])
    return out


def _n(rows: int) -> int | None:
    """A row count flag: -1 takes every row, 0 none, n the first n."""
    return None if rows < 0 else rows
