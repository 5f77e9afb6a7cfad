"""GSM8K scored as lm-evaluation-harness scores ``gsm8k`` (strict match, flexible extract), on answers written for
the test with the verdicts worked out by hand from the harness's rules; translation by sacrebleu's chrF and BLEU."""
from __future__ import annotations

import math

import pytest

from wisv.tasks.datasets import load_dataset
from wisv.tasks.qa import answer_settled, check_answer
from wisv.tasks.scoring import FALLBACK, extract, gsm8k_correct, gsm8k_scores, normalise, translation_scores

SOLUTION = "Step one.\nStep two 3 + 4 = 7.\n#### {}"  # a reference solution as GSM8K writes it

CASES = [  # (output, the reference's final answer, strict-match verdict, flexible-extract verdict)
    ("So the total is 18.\n#### 18", "18", True, True),
    ("#### 1,000", "1,000", True, True),  # the separator is removed from both sides
    ("#### 1000", "1,000", True, True),
    ("The answer is $1,000.", "1000", False, True),  # no "#### "; the last number, "$" "," and "." removed
    ("#### -3", "-3", True, True),  # negative (flexible: the second alternative, -?[0-9]+)
    ("It is 2.50 in all.\n#### 2.50", "2.5", False, False),  # exact match: no numeric equality
    ("#### 2.5", "2.5", True, True),  # a decimal
    ("#### 42.", "42", True, True),  # one trailing period is removed
    ("The answer is 42..", "42", False, False),  # only one is
    ("I do not know.", "7", False, False),  # no number: [invalid]
    ("First 3 apples, then 5 more: 8 in all.", "8", False, True),  # several numbers: flexible takes the last
    ("The answer is 8. I checked it 10 times.", "8", False, False),  # ... even when the last is not the answer
    ("#### 8\nBonus question: 9", "8", True, False),  # strict takes the first "#### N", flexible the last number
    ("#### 7 no, wait\n#### 8", "8", False, True),
    ("#### $18", "18", False, True),  # strict wants a digit right after "#### "
    ("####18", "18", False, True),  # ... and the space
    ("He has 5, she has 6", "6", False, True),  # "5," is a match, the last is "6"
]


@pytest.mark.parametrize("text, final, strict, flexible", CASES, ids=[c[0][:30] for c in CASES])
def test_the_harness_rules(text, final, strict, flexible):
    ref = SOLUTION.format(final)
    assert gsm8k_correct(text, ref, "strict-match") is strict
    assert gsm8k_correct(text, ref, "flexible-extract") is flexible


def test_extraction_and_normalisation_steps():
    assert extract("no digits here", "strict-match") == extract("x", "flexible-extract") == FALLBACK
    assert extract("a 12 b $3,400.", "flexible-extract") == "$3,400."
    assert extract("#### 12\n#### 13", "strict-match") == "12"
    assert normalise("He paid\n#### $1,250.") == "1250" and normalise("$1,250.") == "1250"
    assert normalise("ABC") == "abc"  # ignore_case


def test_scores_over_a_set_and_the_real_references():
    texts = [c[0] for c in CASES]
    refs = [SOLUTION.format(c[1]) for c in CASES]
    got = gsm8k_scores(texts, refs)
    assert got == {"strict-match": sum(c[2] for c in CASES) / len(CASES),
                   "flexible-extract": sum(c[3] for c in CASES) / len(CASES)}
    assert all(math.isnan(v) for v in gsm8k_scores([], []).values())
    rows = load_dataset("gsm8k")[:200]  # each reference solution scores itself right by both rules
    assert gsm8k_scores([r.references[0] for r in rows], [r.references[0] for r in rows]) == {
        "strict-match": 1.0, "flexible-extract": 1.0}


def test_check_answer_reads_a_gsm8k_solution_by_flexible_extract():
    ref = SOLUTION.format("1,000")
    assert check_answer("So it costs $1,000.", ref) and not check_answer("So it costs $999.", ref)
    assert check_answer("#### 5", 5)  # the toy checker still reads integers
    assert not answer_settled("It is 1,000. Then more text follows here.", ref)  # the last number may still change


def test_translation_scores_through_sacrebleu():
    row = load_dataset("spec-bench:translation")[0]
    ref = row.references[0]
    same = translation_scores([ref], [ref])
    assert same["chrf"] == pytest.approx(100) and same["bleu"] == pytest.approx(100)
    none = translation_scores(["zzzz qqqq"], [ref])
    part = translation_scores(["Pawnbrokers boom in Singapore as the crisis reaches the middle class"], [ref])
    assert none["chrf"] < part["chrf"] < 100 and none["bleu"] <= part["bleu"] < 100
    assert all(math.isnan(v) for v in translation_scores([], []).values())
