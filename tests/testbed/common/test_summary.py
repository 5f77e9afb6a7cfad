"""The testbed summary's accuracy: toy answers through the ``#### N`` checker, QA answers through wisv.tasks.qa."""
from __future__ import annotations

import pandas as pd
import pytest

from testbed.common.summary import summarize
from wisv.records.rows import to_frame

TEXTS = {1: "3 + 4 = 7\n#### 7", 2: "#### 9", 3: "The capital of France is Paris.", 4: "The capital of Peru is Quito."}


def _summary(answers: dict[str, object]) -> dict:
    outputs = pd.DataFrame({"prompt_id": list(answers), "tokens": [[int(p[1:])] for p in answers],
                            "t_e2e_s": [1.0] * len(answers)})
    prompts = pd.DataFrame({"prompt_id": list(answers), "answer": list(answers.values())})
    return summarize("greedy", to_frame([]), outputs, prompts, lambda t: TEXTS[t[0]], None)


def test_accuracy_checks_toy_and_qa_answers():
    assert _summary({"p1": 7, "p2": 7})["accuracy"] == pytest.approx(0.5)
    assert _summary({"p3": ["Paris"], "p4": ["Lima"]})["accuracy"] == pytest.approx(0.5)
    assert _summary({"p1": 7, "p3": ["Paris", "Paree"]})["accuracy"] == pytest.approx(1.0)
