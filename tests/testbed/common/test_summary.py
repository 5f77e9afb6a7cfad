"""The testbed summary's accuracy: toy answers through the ``#### N`` checker, QA answers through wisv.tasks.qa."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from testbed.common.summary import summarize, table
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


WORDS = {10: "The capital of France is Paris,", 11: " known", 12: " famous", 13: " for", 14: " its", 15: " passive",
         16: "quate", 17: " voice", 18: " museums."}
REF = [10, 11, 13, 14, 15, 17, 18]
NLL = {11: 0.2, 12: 0.9, 16: 6.0}  # the target's NLL of a token (0.1 unless listed): a fragment is very unlikely


def _quality(tokens: dict[str, list[int]]) -> dict:
    outputs = pd.DataFrame({"prompt_id": list(tokens), "tokens": list(tokens.values()), "t_e2e_s": [1.0] * len(tokens)})
    prompts = pd.DataFrame({"prompt_id": list(tokens), "answer": [["Paris"]] * len(tokens)})
    refs = {p: REF for p in tokens}
    return summarize("fh", to_frame([]), outputs, prompts, lambda t: "".join(WORDS[i] for i in t), refs,
                     lambda _p, t: [NLL.get(i, 0.1) for i in t])


def test_drift_and_fluency_beside_matches_target():
    same = _quality({"a": REF})
    assert same["matches_target"] == 1.0 and same["drift_rouge_l"] == pytest.approx(1.0)
    assert same["fluency_ppl_ratio"] == pytest.approx(1.0)
    syn = _quality({"a": [10, 12, 13, 14, 15, 17, 18]})  # " famous" for " known"
    frag = _quality({"a": [10, 11, 13, 14, 15, 16, 18]})  # "passivequate" for "passive voice"
    assert syn["matches_target"] == frag["matches_target"] == 0.0
    assert syn["accuracy"] == frag["accuracy"] == 1.0  # the checker sees no difference
    assert 1.0 > syn["drift_rouge_l"] > frag["drift_rouge_l"] > 0.6
    assert 1.0 < syn["fluency_ppl_ratio"] < 1.25 < frag["fluency_ppl_ratio"]


def test_no_reference_no_quality():
    s = _summary({"p1": 7})
    assert math.isnan(s["drift_rouge_l"]) and math.isnan(s["fluency_ppl_ratio"])
    assert math.isnan(s["fluency_ext_ppl_ratio"])


def test_external_fluency_column_reads_decoded_prompt_and_texts():
    """The third model's scorer gets (decoded prompt, decoded output) and its ratio is a column of its own; without
    it the column is nan and the target's fluency is unchanged."""
    seen = []

    def ext(prompt: str, text: str) -> list[float]:  # a judge that dislikes the fragment, not the synonym
        seen.append((prompt, text))
        return [2.0 if "passivequate" in text else 0.5] * len(text.split())

    tokens = {"a": [10, 12, 13, 14, 15, 17, 18], "b": [10, 11, 13, 14, 15, 16, 18]}  # synonym, fragment
    outputs = pd.DataFrame({"prompt_id": list(tokens), "tokens": list(tokens.values()), "t_e2e_s": [1.0, 1.0]})
    prompts = pd.DataFrame({"prompt_id": ["a", "b"], "prompt_ids": [[10], [10]], "answer": [["Paris"]] * 2})
    decode = lambda t: "".join(WORDS[i] for i in t)  # noqa: E731
    s = summarize("fh", to_frame([]), outputs, prompts, decode, {p: REF for p in tokens},
                  lambda _p, t: [NLL.get(i, 0.1) for i in t], ext)
    assert ("The capital of France is Paris,", decode(tokens["a"])) in seen
    assert ("The capital of France is Paris,", decode(REF)) in seen
    n_syn, n_frag, n_ref = (len(decode(t).split()) for t in (tokens["a"], tokens["b"], REF))
    expected = math.exp((0.5 * n_syn + 2.0 * n_frag) / (n_syn + n_frag) - 0.5)
    assert s["fluency_ext_ppl_ratio"] == pytest.approx(expected)
    off = summarize("fh", to_frame([]), outputs, prompts, decode, {p: REF for p in tokens},
                    lambda _p, t: [NLL.get(i, 0.1) for i in t])
    assert math.isnan(off["fluency_ext_ppl_ratio"]) and off["fluency_ppl_ratio"] == s["fluency_ppl_ratio"]
    printed = table([s, off]).splitlines()  # header, index name, one line per summary: the new column is last
    assert printed[0].split()[-1] == "fluency_ext_ppl_ratio"
    assert printed[-2].split()[-1] == f"{expected:.3f}" and printed[-1].split()[-1] == "-"
