"""The field's metrics by hand: Spec-Bench's speed-up (a ratio of mean question speeds, not a mean of ratios) and mean
accepted tokens (equal to vLLM's mean_acceptance_length), vLLM's per-position acceptance rate, the per-task table."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from wisv.records.fieldmetrics import (
    MEAN_ACCEPTED,
    OVERALL,
    accept_lengths,
    mean_accepted_tokens,
    per_position_acceptance,
    prompt_speeds,
    question_speeds,
    speedup,
    task_markdown,
    task_table,
)
from wisv.records.rows import RoundRow, to_frame
from wisv.records.summary import spec_decode_metrics
from wisv.tasks.datasets import SPEC_BENCH_TASKS, task_of


def _rounds(spec, tree_depth=None) -> pd.DataFrame:
    return to_frame(RoundRow(prompt_id="p", round=i, drafted=k, accepted=a,
                             tree_depth=None if tree_depth is None else tree_depth[i])
                    for i, (k, a) in enumerate(spec))


def test_mean_accepted_tokens_is_mean_acceptance_length_on_any_rounds():
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = rng.integers(0, 9, size=rng.integers(1, 30))  # drafted; 0: a round without a draft (no step)
        acc = [int(rng.integers(0, x + 1)) for x in k]
        rounds = _rounds(list(zip(k.tolist(), acc)))
        want = spec_decode_metrics(rounds)["mean_acceptance_length"]
        got = mean_accepted_tokens(rounds)
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want)
    assert mean_accepted_tokens(_rounds([(4, 4), (4, 1), (0, 0)])) == pytest.approx((5 + 2) / 2)  # by hand
    assert math.isnan(mean_accepted_tokens(pd.DataFrame()))


def test_accept_lengths_count_the_bonus_token():
    assert accept_lengths(_rounds([(4, 4), (4, 0), (0, 0), (2, 1)])).tolist() == [5, 1, 2]


def test_per_position_acceptance_by_hand():
    # drafts of 4, 4, 4 tokens accepting 4, 2, 0; a draft cut to 2 tokens accepting both; a round with no draft
    table = per_position_acceptance(_rounds([(4, 4), (4, 2), (4, 0), (2, 2), (0, 0)]))
    assert table["position"].tolist() == [0, 1, 2, 3]
    assert table["accepted"].tolist() == [3, 3, 1, 1] and table["drafts"].tolist() == [4] * 4
    assert table["rate"].tolist() == [0.75, 0.75, 0.25, 0.25]  # vLLM: over all drafts
    assert table["reached"].tolist() == [4, 4, 3, 3]
    assert table["rate_reached"].tolist() == pytest.approx([0.75, 0.75, 1 / 3, 1 / 3])


def test_per_position_sums_are_vllms_totals():
    rng = np.random.default_rng(1)
    k = rng.integers(1, 9, size=40)
    rounds = _rounds([(int(x), int(rng.integers(0, x + 1))) for x in k])
    table, m = per_position_acceptance(rounds), spec_decode_metrics(rounds)
    assert table["accepted"].sum() == m["num_accepted_draft_tokens"]
    assert 1 + table["rate"].sum() == pytest.approx(m["mean_acceptance_length"])


def test_a_trees_positions_are_its_depth():
    table = per_position_acceptance(_rounds([(7, 2), (5, 3)], tree_depth=[3, 4]))  # 7 and 5 nodes
    assert table["position"].tolist() == [0, 1, 2, 3] and table["reached"].tolist() == [2, 2, 2, 1]
    assert table["accepted"].tolist() == [2, 2, 1, 0]


def _per_prompt(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["prompt_id", "n_tokens", "latency_s"])


PROMPTS = pd.DataFrame({"prompt_id": ["1", "1-t2", "2", "3"], "question_id": ["1", "1", "2", "3"],
                        "category": ["writing", "writing", "translation", "translation"], "turn": [1, 2, 1, 1]})
METHOD = _per_prompt([("1", 10, 1.0), ("1-t2", 30, 1.0), ("2", 10, 0.5), ("3", 10, 0.1)])
BASE = _per_prompt([("1", 10, 2.0), ("1-t2", 30, 2.0), ("2", 10, 0.25)])  # question 3 did not finish


def test_speed_is_per_question_over_its_turns_and_speedup_a_ratio_of_means():
    m, b = question_speeds(METHOD, PROMPTS), question_speeds(BASE, PROMPTS)
    assert m.to_dict() == {"1": 20.0, "2": 20.0, "3": 100.0} and b.to_dict() == {"1": 10.0, "2": 40.0}
    assert speedup(m, b) == pytest.approx(20 / 25)  # on questions 1 and 2; not the mean of ratios (2 and 0.5)
    assert math.isnan(speedup(m[["3"]], b))
    assert question_speeds(METHOD).to_dict()["1-t2"] == 30.0  # without question ids each prompt is one


def test_prompt_speeds_read_a_runs_outputs():
    outputs = pd.DataFrame({"prompt_id": ["a", "b"], "tokens": [[1, 2, 3], [4]], "t_e2e_s": [1.5, 2.0],
                            "error": [None, "edge error"]})
    assert prompt_speeds(outputs).to_dict("records") == [{"prompt_id": "a", "n_tokens": 3, "latency_s": 1.5}]


def test_the_task_table_is_laid_out_as_spec_benchs():
    sd_rounds = _rounds([(4, 4), (4, 0)])
    prompts = PROMPTS.assign(task=PROMPTS["category"].map(task_of))
    table = task_table({"target": (BASE, pd.DataFrame()), "sd": (METHOD, sd_rounds)}, prompts, "target",
                       tuple(reversed(SPEC_BENCH_TASKS)))  # the order given wins over the alphabet
    assert list(table.columns)[:2] == ["Translation", "Multi-turn Conversation"]
    table = task_table({"target": (BASE, pd.DataFrame()), "sd": (METHOD, sd_rounds)}, prompts, "target",
                       tuple(SPEC_BENCH_TASKS))
    assert list(table.columns) == ["Multi-turn Conversation", "Translation", MEAN_ACCEPTED, OVERALL]
    assert table.loc["target", "Translation"] == 1.0 and math.isnan(table.loc["target", MEAN_ACCEPTED])
    assert table.loc["sd", "Multi-turn Conversation"] == pytest.approx(20 / 10)
    assert table.loc["sd", "Translation"] == pytest.approx(20 / 40)  # question 3: the baseline has none
    assert table.loc["sd", OVERALL] == pytest.approx(20 / 25)
    assert table.loc["sd", MEAN_ACCEPTED] == pytest.approx(3.0)
    md = task_markdown(table).splitlines()
    assert md[0] == "| Method | Multi-turn Conversation | Translation | #Mean Accepted Tokens | Overall |"
    assert md[2] == "| target | 1.00x | 1.00x | - | 1.00x |" and md[3] == "| sd | 2.00x | 0.50x | 3.00 | 0.80x |"
