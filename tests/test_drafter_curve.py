"""The learning curve's fixed sample of the suite's test pools (groups by family x role, spread over kinds) and the
model card's table of AAL per kind group."""
from __future__ import annotations

import json

import pytest

from scripts import smollm2_card
from scripts.drafter_curve import POOLED, sample_groups, suite_test_sample
from wisv.tasks import suite


def _row(kind: str, i: int) -> dict:
    return {"prompt_id": f"su-{kind}-{i:03d}", "kind": kind, "prompt": f"{kind} {i}"}


@pytest.mark.parametrize("n, want", [(1, 1), (4, 4), (7, 5)])  # 5 rows in all: n beyond that takes every one
def test_sample_groups_take_kinds_in_turn(n, want):
    rows = [_row("author", i) for i in range(3)] + [_row("currency", i) for i in range(2)]  # both unseen questions
    got = sample_groups(rows, n, seed=3)["question-unseen"]
    assert len(got) == want
    kinds = [r["kind"] for r in got]
    assert kinds[:2] == ["author", "currency"][:len(kinds[:2])]  # one of each kind before a second of any
    assert got == sample_groups(rows, n, seed=3)["question-unseen"]


def test_the_suite_sample_is_fixed_and_grouped_by_role_and_family():
    groups = suite_test_sample(6, 1234)
    assert set(groups) == {"question-seen", "question-unseen", "free-seen", "free-unseen"}
    assert set(POOLED["free"]) <= set(groups)
    for name, rows in groups.items():
        fam, role = name.split("-")
        assert len(rows) == 6 and len({r["kind"] for r in rows}) == 6  # six kinds, one prompt each
        assert all(suite.family(r["kind"]) == fam and suite.role(r["kind"]) == role for r in rows)
    test_ids = {r["prompt_id"] for r in suite.load_suite("test") + suite.load_suite("test", "free")}
    assert {r["prompt_id"] for rs in groups.values() for r in rs} <= test_ids
    assert suite_test_sample(6, 1234) == groups and suite_test_sample(6, 7) != groups


def test_the_card_tabulates_aal_per_kind_group(tmp_path):
    aal = {"question-seen": 1.2, "question-unseen": 0.7, "free-seen": 0.5, "free-unseen": 0.4, "free": 0.45}
    curve = {"config": {"draft_len": 8, "max_new_tokens": 64, "out": "c.json"}, "run_dir": "runs/x",
             "groups": {g: {"n": 2, "kinds": ["a", "b"]} for g in aal if g != "free"},
             "points": [{"tokens": 0, "step": 0, "aal": dict.fromkeys(aal, 0.05)},
                        {"tokens": 25_000, "step": 40, "aal": aal}],
             "built": {"drafter": "/c/pairs/smollm2/drafter", "aal": aal}}
    path = tmp_path / "curve.json"
    path.write_text(json.dumps(curve))
    text = smollm2_card._kind_groups(str(path))
    assert "| questions, unseen kinds |" in text.replace("| questions, seen kinds ", "")
    assert "| step 40 | 25,000 | 1.2 | 0.7 | 0.5 | 0.4 | 0.45 |" in text
    assert "| undistilled | 0 |" in text and "| built drafter (`drafter`) | |" in text
    assert "No learning-curve" in smollm2_card._kind_groups(str(tmp_path / "none.json"))
