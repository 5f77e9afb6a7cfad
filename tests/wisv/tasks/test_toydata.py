"""Toy task: deterministic, disjoint splits, 2-4 correct steps, and the answer checker."""
import re

import pytest

from wisv.tasks.toydata import MAX_VALUE, extract_answer, is_correct, load_split


@pytest.mark.slow
def test_splits_are_deterministic_and_disjoint():
    a, b = load_split("test", 50), load_split("test", 50)
    assert a == b
    q = {s: {p.question for p in load_split(s, 400)} for s in ("train", "calib", "test")}
    assert not (q["train"] & q["test"]) and not (q["train"] & q["calib"]) and not (q["calib"] & q["test"])
    assert len(load_split("test")) == 500


def test_solutions_are_correct_chains():
    for p in load_split("test", 200):
        eqs = re.findall(r"(\d+) ([-+*]) (\d+) = (\d+)", p.solution)
        assert 2 <= len(eqs) <= 4
        for x, op, y, z in eqs:
            assert eval(f"{x} {op} {y}") == int(z) and 1 <= int(z) <= MAX_VALUE
        assert int(eqs[-1][3]) == p.answer == extract_answer(p.solution)
        assert p.prompt.startswith("Question: ") and p.prompt.endswith("\nAnswer:")


def test_wording_varies():
    sols = [p.solution for p in load_split("test", 100)]
    assert sum("so he has" in s or "so she has" in s for s in sols) > 5
    assert sum("which gives" in s for s in sols) > 5


@pytest.mark.parametrize("text,answer,ok", [
    ("... #### 12", 12, True), ("#### 12 and #### 13", 12, True), ("####7", 7, True),
    ("no answer", 3, False), ("#### 4", 5, False),
])
def test_checker(text, answer, ok):
    assert is_correct(text, answer) is ok


def test_unknown_split():
    with pytest.raises(ValueError, match="unknown split"):
        load_split("dev")
