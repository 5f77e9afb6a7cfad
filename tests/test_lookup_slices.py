"""The prompt-lookup studies' slices of Spec-Bench (results/lookup-auto/prompts-*.jsonl): disjoint, and each prompt
Spec-Bench's own first turn of the question it names."""
from __future__ import annotations

import json
from pathlib import Path

from wisv.tasks.datasets import SPEC_BENCH_FILE, SPEC_BENCH_ID

SLICES = ("dev", "test", "fresh")  # chosen on, measured on (rounds 22-24), measured on (round 25)


def read(name: str) -> list[dict]:
    path = Path(__file__).resolve().parents[1] / "results" / "lookup-auto" / f"prompts-{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_slices_are_disjoint_and_spec_benchs_own_questions():
    questions = {q["question_id"]: q for q in map(json.loads, SPEC_BENCH_FILE.read_text().splitlines())}
    seen: set[str] = set()
    for name in SLICES:
        rows = read(name)
        ids = {r["prompt_id"] for r in rows}
        assert len(ids) == len(rows) == 15 and not ids & seen, name
        seen |= ids
        for r in rows:
            q = questions[int(r["prompt_id"].removeprefix(SPEC_BENCH_ID))]
            assert (r["prompt"], r["category"]) == (q["turns"][0], q["category"])
