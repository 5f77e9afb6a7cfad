"""Write the broad task suite's pools (wisv/assets/suite/): seeded, offline, the same files every time.

Question kinds (wisv/tasks/suite_kinds.py) come in two forms, answer first and answer last; free-form kinds
(wisv/tasks/suite_free.py) in one.  Which pool a kind goes to is its role (wisv/tasks/suite.py):

- seen: its entities (a fact, a pair of numbers, a topic) are shuffled and cut into distill / calib / test by
  ``fractions``, every prompt about an entity in its entity's pool.  distill gets every phrasing of both forms (3
  answer-first, 2 answer-last; each template of a free kind); calib and test one phrasing a form, picked by the seed;
- dev: calib only, ``dev_entities`` entities, one phrasing a form;
- unseen: test only, ``unseen_entities`` entities, one phrasing a form.

A kind has at most ``max_entities`` entities (the generated kinds have hundreds).  Each file spreads its kinds evenly
(make_qa's ``spread``), so its first N rows are a fair sample."""
from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field

import config
from scripts.data.qa import spread
from wisv.tasks.jsonl import write_splits
from wisv.tasks.pools import POOLS
from wisv.tasks.suite import SUITE_DIR, family, pool_path, role
from wisv.tasks.suite_free import FREE_KINDS
from wisv.tasks.suite_kinds import QUESTION_KINDS

FORMS = ("first", "last")


@dataclass
class MakeSuiteConfig:
    """One generation of the task suite's pools."""

    out: str = str(SUITE_DIR)  # directory for {distill,calib,test}.jsonl and free_{distill,calib,test}.jsonl
    seed: int = 42  # seed of the entities' shuffle, the phrasings picked and the word problems' names
    fractions: list[float] = field(default_factory=lambda: [0.7, 0.15, 0.15])  # a seen kind's split: distill calib test
    max_entities: int = field(default=60, metadata={"min": 6})  # entities of a kind at most (after the shuffle)
    dev_entities: int = field(default=12, metadata={"min": 1})  # a dev kind's entities in calib
    unseen_entities: int = field(default=10, metadata={"min": 1})  # an unseen kind's entities in test


def entity_prompts(kind: str, rng: random.Random) -> list[tuple[dict, list[list[str]]]]:
    """A kind's entities in table order: (row fields shared by its prompts, its phrasings per form)."""
    if family(kind) == "free":
        return [({"form": "free"}, [prompts]) for _, prompts in FREE_KINDS[kind].items()]
    qk = QUESTION_KINDS[kind]
    return [({"answers": answers}, [qk.prompts(q, f) for f in FORMS]) for q, answers in qk.items(rng)]


def kind_rows(kind: str, cfg: MakeSuiteConfig) -> dict[str, list[dict]]:
    """One kind's rows in each pool, ids ``su-<kind>-NNN`` numbered in entity order."""
    rng = random.Random(f"{cfg.seed}-{kind}")
    ents = entity_prompts(kind, rng)
    order = list(range(len(ents)))
    rng.shuffle(order)
    order = order[:cfg.max_entities]
    r = role(kind)
    if r == "seen":
        cuts = [round(sum(cfg.fractions[:i + 1]) * len(order)) for i in range(len(POOLS))]
        where = {i: p for p, lo, hi in zip(POOLS, [0] + cuts[:-1], cuts) for i in order[lo:hi]}
    else:
        n, pool = (cfg.dev_entities, "calib") if r == "dev" else (cfg.unseen_entities, "test")
        where = {i: pool for i in order[:n]}
    picks = {i: [rng.randrange(len(forms)) for forms in ents[i][1]] for i in order}  # one phrasing a form
    out: dict[str, list[dict]] = {p: [] for p in POOLS}
    n = 0
    for i in sorted(where):
        shared, forms = ents[i]
        for f, phrasings in enumerate(forms):
            chosen = phrasings if where[i] == "distill" else [phrasings[picks[i][f]]]
            for prompt in chosen:
                form = shared.get("form") or FORMS[f]
                row = {"prompt_id": f"su-{kind}-{n:03d}", "kind": kind, "domain": _domain(kind), "form": form,
                       "prompt": prompt}
                out[where[i]].append(row | ({"answers": shared["answers"]} if "answers" in shared else {})
                                     | {"raw": True})
                n += 1
    return out


def _domain(kind: str) -> str:
    return "free" if family(kind) == "free" else QUESTION_KINDS[kind].domain


def pools(cfg: MakeSuiteConfig) -> dict[str, list[dict]]:
    """Every file's rows by its name (distill, calib, test, free_distill, free_calib, free_test)."""
    if len(cfg.fractions) != len(POOLS) or abs(sum(cfg.fractions) - 1) > 1e-9 or min(cfg.fractions) <= 0:
        raise ValueError(f"fractions {cfg.fractions}: expected {len(POOLS)} positive shares summing to 1")
    groups: dict[str, list[list[dict]]] = {pool_path(p, fam).stem: [] for fam in ("question", "free") for p in POOLS}
    for kind in [*QUESTION_KINDS, *FREE_KINDS]:
        for p, rows in kind_rows(kind, cfg).items():
            if rows:
                groups[pool_path(p, family(kind)).stem].append(rows)
    return {name: spread(g) for name, g in groups.items()}


def parse_args(argv: list[str] | None = None) -> MakeSuiteConfig:
    return config.parse(MakeSuiteConfig, argv, prog="python -m scripts.data.suite",
                        description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict[str, list[dict]]:
    cfg = parse_args(argv)
    return write_splits(cfg.out, pools(cfg))


if __name__ == "__main__":  # bad input (a value, a missing or unwritable path) is one line and exit 2
    sys.exit(config.run_reporting("python -m scripts.data.suite", main, (ValueError, OSError)))
