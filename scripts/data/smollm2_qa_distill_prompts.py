"""In-domain distillation prompts for the SmolLM2 drafter: QA questions of the task's kinds, none in the test split.

The pool is the calib split, every question of the kinds dropped from the task (scripts/data/qa.py's DROPPED: their
questions are in neither split), and extra questions from the shipped kinds' templates over words and numbers that
the task's tables do not hold; any prompt whose text is in ``wisv/assets/qa/test.jsonl`` is removed."""
from __future__ import annotations

import json
import random

from scripts.data.qa import DROPPED, KINDS, NUMBER, WORD_KINDS
from wisv.tasks.qa import QA_DIR

EXTRA_WORDS = {
    "capital": ["Brazil", "Belarus", "Estonia", "Latvia", "Lithuania", "Slovakia", "Slovenia", "Albania", "Jordan",
                "Qatar", "Ghana", "Senegal", "Uganda", "Tanzania", "Zambia", "Algeria", "Tunisia", "Libya",
                "Bolivia", "Ecuador", "Uruguay", "Paraguay", "Panama", "Jamaica", "Mongolia", "Bangladesh",
                "Sri Lanka", "Cambodia", "Laos", "Singapore", "Luxembourg", "Malta", "Cyprus", "Georgia", "Armenia"],
    "opposite": ["wide", "smooth", "sharp", "awake", "brave", "polite", "happy", "empty", "noisy", "asleep", "over",
                 "front", "top", "give", "lend", "arrive", "accept", "add", "enter", "rise", "sunny", "beautiful",
                 "safe", "simple", "quick", "kind", "hungry", "warm", "cool", "busy", "lazy", "tidy", "new"],
    "plural": ["goose", "ox", "cup", "pen", "hat", "bag", "ball", "girl", "room", "bed", "star", "coin", "shoe", "egg",
               "door", "wall", "bench", "brush", "match", "fly", "pony", "cherry", "hobby", "loaf", "calf", "shelf",
               "thief", "echo", "zero", "radio", "piano", "photo", "louse", "moose", "crisis", "ship", "river"],
    "language": ["Austria", "Belgium", "Switzerland", "Chile", "Peru", "Colombia", "Cuba", "Egypt", "Morocco",
                 "Saudi Arabia", "Pakistan", "India", "Indonesia", "Malaysia", "Kenya", "Ireland", "Scotland",
                 "Wales", "Canada", "New Zealand", "Iceland", "Estonia", "Latvia", "Lithuania", "Slovakia"],
    "symbol": ["aluminium", "magnesium", "silicon", "phosphorus", "fluorine", "argon", "lithium", "nickel",
               "cobalt", "platinum", "titanium", "chromium", "manganese", "iodine", "bromine", "radon"],
    "first_letter": ["airport", "balloon", "cookie", "dolphin", "envelope", "fountain", "gorilla", "helmet",
                     "iceberg", "jaguar", "koala", "lantern", "meadow", "noodle", "octopus", "puzzle", "quilt",
                     "raincoat", "sandwich", "tractor", "uniform", "vulture", "walrus", "xylophone", "yarn",
                     "zipper", "bottle", "camera", "dinner", "falcon", "harbor", "ink", "jar", "lobster", "magnet",
                     "oyster", "pepper", "robot", "spoon", "turtle", "vase", "wizard", "beetle", "cloud", "duck"],
    "city_country": ["Kyoto", "Naples", "Hamburg", "Seville", "Marseille", "Lyon", "Florence", "Venice",
                     "Frankfurt", "Porto", "Krakow", "Prague", "Budapest", "Beijing", "Seoul", "Bangkok", "Delhi",
                     "Melbourne", "Vancouver", "Montreal", "Boston", "Miami", "Edinburgh", "Liverpool", "Zurich"],
}


def extra_word_prompts() -> list[str]:
    """The shipped word kinds' templates over EXTRA_WORDS."""
    return [WORD_KINDS[k][0].format(w=w) for k, words in EXTRA_WORDS.items() for w in words]


def extra_number_prompts(rng: random.Random) -> list[str]:
    """Additions beyond the task's 1..10 range (the task's own range is covered by the calib split)."""
    pairs = rng.sample([(a, b) for a in range(2, 40) for b in range(2, 40) if max(a, b) > 10], 60)
    return [f"What is {a} + {b}? {NUMBER}" for a, b in pairs]


def dropped_prompts(seed: int) -> list[str]:
    """Every question of the kinds the task dropped (make_qa's DROPPED), drawn as make_qa draws them."""
    return [r["prompt"] for k in DROPPED for r in KINDS[k](random.Random(f"{seed}-{k}"))]


def _split_prompts(name: str) -> list[str]:
    return [json.loads(line)["prompt"] for line in (QA_DIR / f"{name}.jsonl").read_text().splitlines() if line.strip()]


def qa_distill_prompts(seed: int) -> list[str]:
    """The in-domain pool (calib, dropped kinds, extra words and numbers), test prompts removed, shuffled."""
    test = set(_split_prompts("test"))
    pool = _split_prompts("calib") + dropped_prompts(15) + extra_word_prompts()
    pool += extra_number_prompts(random.Random(seed))
    out = sorted(set(pool) - test)
    random.Random(seed).shuffle(out)
    return out
