"""The broad task suite: which kind goes to which pool (the one table of seen, dev and unseen kinds), and the shipped
pools (``wisv/assets/suite/``, written by ``python -m scripts.data.suite``).

Kinds and their roles:

- **seen**: in every pool, with disjoint prompts: the drafter is distilled on them, the judge calibrated on them, and
  the test pool asks them again about other entities.  The long-form task's five templates are seen kinds too;
- **dev**: in the calibration pool only: the judge's leave-kinds-out dev slice, so that tau and other choices are
  made on kinds it (and the drafter) never trained on (``dev_split``);
- **unseen**: in the test pool only: no distillation or calibration prompt is of these kinds.

Pools: ``{distill,calib,test}.jsonl`` hold the questions (rows: prompt_id ``su-<kind>-NNN``, kind, domain, form
"first"/"last", prompt, answers, raw) and ``free_{distill,calib,test}.jsonl`` the free-form instructions (form
"free", no answers).  Pure: no torch."""
from __future__ import annotations

import re
from pathlib import Path

from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.pools import LONGFORM_DIR, POOLS
from wisv.tasks.suite_free import FREE_KINDS
from wisv.tasks.suite_kinds import QUESTION_KINDS

SUITE_DIR = Path(__file__).resolve().parents[1] / "assets" / "suite"
FAMILIES = ("question", "free")  # checkable answers, or free-form instructions
ROLES = ("seen", "dev", "unseen")
LONGFORM_KINDS = ("capital", "city_country", "language", "language_last", "capital_history")  # seen, geography
# The split of kinds: every kind not named here is seen.
UNSEEN_KINDS = ("chemical_formula", "baby_animal", "author", "event_year", "players_per_team", "unit_multiple",
                "days_in_month", "currency", "subtraction", "word_problem_mul", "compare_things", "yes_no_fact",
                "letter_count", "past_tense",
                "recipe_outline", "dialogue", "thank_you", "news_report", "difference", "rewrite_formal")
DEV_KINDS = ("geometry", "landmark", "division", "plural", "sport_term", "even_odd", "speech", "review")
_ID_RE = re.compile(r"^(?:su|lf)-(.+)-\d+$")


def kind_split() -> dict[str, str]:
    """Every kind of the suite and of the long-form task -> its role: seen, dev or unseen."""
    kinds = [*QUESTION_KINDS, *FREE_KINDS, *LONGFORM_KINDS]
    return {k: "unseen" if k in UNSEEN_KINDS else "dev" if k in DEV_KINDS else "seen" for k in kinds}


def role(kind: str) -> str:
    """A kind's role (seen, dev, unseen); an unknown kind is an error."""
    split = kind_split()
    if kind not in split:
        raise ValueError(f"kind {kind!r}: not a kind of the task suite or the long-form task")
    return split[kind]


def is_unseen(kind: str) -> bool:
    """Whether no distillation or calibration prompt is of this kind (it is in the test pool only)."""
    return role(kind) == "unseen"


def is_dev(kind: str) -> bool:
    """Whether the kind is one of calib's leave-kinds-out dev kinds."""
    return role(kind) == "dev"


def family(kind: str) -> str:
    """question (a checkable answer) or free (a free-form instruction)."""
    role(kind)
    return "free" if kind in FREE_KINDS else "question"


def kind_of(prompt_id: str) -> str:
    """The kind a suite or long-form prompt id names: "su-author-012" -> "author"."""
    m = _ID_RE.match(prompt_id)
    if not m:
        raise ValueError(f"prompt id {prompt_id!r}: expected su-<kind>-N or lf-<kind>-N")
    return m.group(1)


def dev_split(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Calibration rows cut by kind (leave kinds out): (rows of the other kinds, rows of the dev kinds)."""
    dev = [r for r in rows if is_dev(r["kind"])]
    return [r for r in rows if not is_dev(r["kind"])], dev


def pool_path(pool: str, fam: str = "question") -> Path:
    """The shipped JSONL of a pool of one family."""
    if pool not in POOLS:
        raise ValueError(f"suite pool {pool!r}: expected one of {POOLS}")
    if fam not in FAMILIES:
        raise ValueError(f"suite family {fam!r}: expected one of {FAMILIES}")
    return SUITE_DIR / (f"{pool}.jsonl" if fam == "question" else f"free_{pool}.jsonl")


def load_suite(pool: str, fam: str = "question", longform: bool = False, n: int | None = None) -> list[dict]:
    """The first ``n`` rows (all if None) of a suite pool; with ``longform``, the long-form task's pool of the same
    name follows the suite's questions (seen kinds, domain geography)."""
    rows = read_jsonl(pool_path(pool, fam))
    if longform and fam == "question":
        rows += [{**r, "domain": "geography"} for r in read_jsonl(LONGFORM_DIR / f"{pool}.jsonl")]
    return rows[:n]
