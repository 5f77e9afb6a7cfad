"""Free-form calibration prompts for the SmolLM2 decision head (``wisv/assets/freeform/calib.jsonl``): instructions
with no answer to check, written for the head's calibration from templates x topics that the drafter's distillation
generator (scripts/data/smollm2_distill_prompts.py) does not use; disjoint from the distillation pool, the generic
held-out set and the long-form pools (tests/wisv/test_pools.py checks it).  ``python -m
scripts.data.freeform_calib_prompts`` rewrites the file (seeded: the same file every time)."""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from config import one_line_errors

OUT = Path(__file__).resolve().parents[2] / "wisv" / "assets" / "freeform" / "calib.jsonl"
TOPICS = ("submarines", "hot air balloons", "origami", "glaciers", "the saxophone", "kites", "lightning rods",
          "beekeeping", "sourdough starters", "the metric system", "windmills", "canals", "igloos", "crossword puzzles",
          "sign language", "the post office", "vending machines", "escalators", "umbrellas", "zippers",
          "the refrigerator", "compost", "tide pools", "sand dunes", "hummingbirds", "octopuses", "giraffes",
          "hedgehogs", "bamboo", "sunflowers", "maple syrup", "popcorn", "pancakes", "lemonade", "picnics",
          "train stations", "marathons", "skateboards", "roller coasters", "magic tricks", "puppets", "chess clocks",
          "typewriters", "vinyl records", "fountain pens", "the abacus", "sundials", "hourglasses", "thermometers",
          "barometers", "wind chimes", "stained glass", "mosaics", "quilts", "sculpture", "jazz", "opera",
          "folk dances", "street food", "night markets")
TEMPLATES = ("How would you explain {t} to a friend who has never heard of it?",
             "Write a friendly note recommending {t} to a neighbour.",
             "What should a beginner know before trying {t}?",
             "Describe a day in the life of someone who works with {t}.",
             "Write a short dialogue between two people talking about {t}.",
             "Give a step-by-step description of how {t} came to be.",
             "What are the pros and cons of {t}?",
             "Write a product description for a book about {t}.",
             "In a few sentences, argue that {t} deserve more attention.",
             "Write a limerick about {t}.",
             "Describe {t} using all five senses.",
             "Imagine {t} disappeared tomorrow. What would change?")


def freeform_pool() -> list[str]:
    """Every distinct free-form prompt (templates x topics), sorted."""
    return sorted({tpl.format(t=t) for tpl in TEMPLATES for t in TOPICS})


def freeform_rows(n: int, seed: int) -> list[dict]:
    """``n`` prompts of one seeded order, as prompt-file rows (raw text, no answer)."""
    pool = freeform_pool()
    random.Random(seed).shuffle(pool)
    return [{"prompt_id": f"ff-{i:03d}", "prompt": p, "raw": True} for i, p in enumerate(pool[:n])]


def main(argv: list[str] | None = None) -> None:
    """Write the calibration file."""
    ap = one_line_errors(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    ap.add_argument("--n", type=int, default=240, help="prompts to write (>= 1; at most the pool's size)")
    ap.add_argument("--seed", type=int, default=0, help="shuffle seed")
    ap.add_argument("--out", type=Path, default=OUT, help="output JSONL")
    a = ap.parse_args(argv)
    if not 1 <= a.n <= len(freeform_pool()):
        ap.error(f"--n must be in 1..{len(freeform_pool())}, got {a.n}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("".join(json.dumps(r) + "\n" for r in freeform_rows(a.n, a.seed)))
    print(f"wrote {a.n} prompts to {a.out}")


if __name__ == "__main__":
    main()
