"""The named prompt sets read in their public formats: every row, MT-Bench with both turns, Spec-Bench's categories,
GSM8K's `#### N` answers, vLLM's custom format; malformed rows and bad names are one-line errors naming the place."""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter

import pytest

from wisv.tasks.datasets import (
    DATASETS_DIR,
    GSM8K_FILE,
    MT_BENCH_CATEGORIES,
    SPEC_BENCH_CATEGORIES,
    SPEC_BENCH_FILE,
    check_dataset,
    load_dataset,
    parse_spec,
    scored_fields,
    task_of,
)

SHA256 = {SPEC_BENCH_FILE: "4b6d33e79484f9841c487ee87d1cf6aa8c6066f61d5d482ff09e5a007fafdf04",
          GSM8K_FILE: "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"}


def test_the_shipped_files_are_the_public_ones_with_their_licence_and_provenance():
    for path, digest in SHA256.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
        prov = (path.parent / "PROVENANCE.md").read_text()
        assert digest in prov and "licence" in prov
        assert (path.parent / "LICENSE").read_text().strip()
    assert "Apache License" in (DATASETS_DIR / "spec-bench" / "LICENSE").read_text()
    assert "MIT License" in (DATASETS_DIR / "gsm8k" / "LICENSE").read_text()


def test_spec_bench_is_read_whole_480_questions_in_13_categories():
    rows = load_dataset("spec-bench")
    lines = [json.loads(x) for x in SPEC_BENCH_FILE.read_text().splitlines()]
    assert len(rows) == len(lines) == 480
    assert Counter(r.category for r in rows) == {c: 10 for c in MT_BENCH_CATEGORIES} | {
        c: 80 for c in SPEC_BENCH_CATEGORIES if c not in MT_BENCH_CATEGORIES}
    for r, line in zip(rows, lines):  # as the file gives them
        assert r.prompt_id == f"spec-bench-{line['question_id']}" and list(r.turns) == line["turns"]
        assert list(r.references[:len(line.get("reference", []))]) == line.get("reference", [])


def test_mt_bench_is_spec_benchs_first_80_with_both_turns():
    rows = load_dataset("mt-bench")
    assert len(rows) == 80 and {r.category for r in rows} == set(MT_BENCH_CATEGORIES)
    assert all(len(r.turns) == 2 for r in rows)
    assert [r.prompt_id for r in rows] == [f"spec-bench-{i}" for i in range(81, 161)]
    assert rows[0].turns[1] == "Rewrite your previous response. Start every sentence with the letter A."


def test_categories_named_are_taken_in_turn_each_in_file_order():
    rows = load_dataset("spec-bench:translation,qa")
    assert Counter(r.category for r in rows) == {"translation": 80, "qa": 80}
    assert rows[0].prompt_id == "spec-bench-161" and rows[0].turns[0].startswith("Translate German to English:")
    assert [r.category for r in rows[:4]] == ["translation", "qa", "translation", "qa"]
    tr = [r.prompt_id for r in rows if r.category == "translation"]
    assert tr == sorted(tr, key=lambda p: int(p.rsplit("-", 1)[1]))
    first8 = load_dataset("spec-bench:" + ",".join(MT_BENCH_CATEGORIES))[:8]
    assert [r.category for r in first8] == list(MT_BENCH_CATEGORIES)  # a short run covers every category
    assert [r.prompt_id for r in load_dataset("spec-bench:writing")][:2] == ["spec-bench-81", "spec-bench-82"]


def test_gsm8k_is_every_test_problem_with_its_hash_answer():
    rows = load_dataset("gsm8k")
    assert len(rows) == 1319 and all(r.category == "math_reasoning" for r in rows)
    assert all(re.search(r"\n#### -?[0-9,]+$", r.references[0]) for r in rows)
    assert rows[0].prompt_id == "gsm8k-1" and rows[0].references[0].endswith("#### 18")


def test_spec_benchs_math_reasoning_rows_are_gsm8k_test_problems():
    gsm = {r.turns[0]: r.references[0] for r in load_dataset("gsm8k")}
    rows = load_dataset("spec-bench:math_reasoning")
    assert len(rows) == 80 and all(gsm[r.turns[0]] == r.references[0] for r in rows)


def test_the_custom_format_is_one_prompt_a_line(tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text('{"prompt": "Hello there"}\n\n{"prompt": "Second", "output_tokens": 5, "prompt_id": "x"}\n')
    rows = load_dataset(f"custom:{f}")
    assert [(r.prompt_id, r.turns, r.category) for r in rows] == [("custom-1", ("Hello there",), "custom"),
                                                                ("x", ("Second",), "custom")]


MALFORMED = [  # (file text, what the line says after "FILE:LINE: ")
    ('{"question_id": 1, "category": "qa", "turns": ["a"]}\n{"question_id": 2, "category": "qa"', "2: not JSON"),
    ('{"question_id": 1, "category": "qa", "turns": []}', "1: 'turns' must be a list of 1 to 2 non-empty texts"),
    ('{"question_id": 1, "category": "qa", "turns": ["a", "b", "c"]}', "1: 'turns' must be a list of 1 to 2"),
    ('{"question_id": 1, "category": "qa", "turns": "a"}', "1: 'turns' must be a list"),
    ('{"category": "qa", "turns": ["a"]}', "1: needs 'question_id' and a 'category' text"),
    ('{"question_id": 1, "category": "qa", "turns": ["a"], "reference": ["x", "y"]}', "1: 'reference' must be a list"),
    ('[1, 2]', "1: expected a JSON object, got list"),
]


@pytest.mark.parametrize("text, message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_a_malformed_spec_bench_row_names_its_file_and_line(tmp_path, monkeypatch, text, message):
    f = tmp_path / "question.jsonl"
    f.write_text(text)
    monkeypatch.setattr("wisv.tasks.datasets.SPEC_BENCH_FILE", f)
    with pytest.raises(ValueError) as e:
        load_dataset("spec-bench")
    assert str(e.value).startswith(f"{f}:{message}") and "\n" not in str(e.value)


def test_malformed_gsm8k_and_custom_rows_and_repeated_ids_are_refused(tmp_path, monkeypatch):
    g = tmp_path / "test.jsonl"
    g.write_text('{"question": "q", "answer": "a\\n#### 1"}\n{"question": "q", "answer": "no marker"}\n')
    monkeypatch.setattr("wisv.tasks.datasets.GSM8K_FILE", g)
    with pytest.raises(ValueError, match=re.escape(f"{g}:2: needs a 'question' text and an 'answer'")):
        load_dataset("gsm8k")
    c = tmp_path / "c.jsonl"
    for text, message in (('{"text": "no prompt"}', f"{c}:1: needs a non-empty 'prompt'"),
                          ('{"prompt": "a", "prompt_id": 7}\n{"prompt": "b", "prompt_id": "7"}',
                           f"{c}: prompt id '7' appears twice")):
        c.write_text(text)
        with pytest.raises(ValueError, match=re.escape(message)):
            load_dataset(f"custom:{c}")


@pytest.mark.parametrize("spec, message", [
    ("nope", "unknown dataset 'nope'"), ("spec-bench:poetry", "unknown category 'poetry'"),
    ("gsm8k:qa", "only spec-bench takes categories"), ("custom:/no/such.jsonl", "custom needs an existing file"),
    ("custom", "custom needs an existing file")])
def test_bad_names_are_one_line(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_spec(spec)


def test_a_dataset_and_a_prompts_file_together_are_refused():
    with pytest.raises(ValueError, match="both name the prompts; give one"):
        check_dataset("gsm8k", "mine.jsonl")
    check_dataset("spec-bench:rag")  # a good one passes


def test_scored_fields_and_tasks():
    assert scored_fields("math_reasoning", "x\n#### 5") == {"answer": "x\n#### 5"}
    assert scored_fields("translation", "The cat") == {"reference": "The cat"}
    assert scored_fields("rag", [["a", "b"]]) == scored_fields("math", "Area is 3") == {}
    assert task_of("writing") == "Multi-turn Conversation" and task_of("rag") == "Retrieval-aug. Generation"
    assert task_of("custom") == "custom"

