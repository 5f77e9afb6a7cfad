"""QA task: normalisation, the answer checker and its dispatch beside the toy checker, and the shipped splits."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wisv.tasks.prompts import read_jsonl_prompts
from wisv.tasks.qa import (
    SPLITS,
    accepted,
    accuracy,
    answer_settled,
    answer_span,
    check_answer,
    closing_span,
    is_correct,
    load_split,
    normalise,
)


@pytest.mark.parametrize("text, want", [
    ("The Capital of France is PARIS.", "capital of france is paris"),
    ("  an apple,   a pear!  ", "apple pear"),
    ("Twenty-one", "21"),
    ("seven days", "7 days"),
    ("forty", "40"),
    ("It weighs 2.5 kg at 3:00.", "it weighs 2.5 kg at 3:00"),
    ("1,000 grams", "1000 grams"),
    ('"B".', "b"),
    ("", ""),
    ("one hundred and twenty-three", "123"),
    ("three thousand four hundred and five grams", "3405 grams"),
    ("A thousand", "1000"),  # the article goes first
    ("4 thousand", "4000"),
    ("twelve hundred", "1200"),
    ("seven eight", "7 8"),  # two numbers side by side stay two
    ("nineteen sixty-nine", "19 69"),
    ("the tenth month", "10th month"),
    ("twenty-first", "21st"),
    ("two hundred and first", "201st"),
    ("H₂O", "h2o"),  # Unicode subscripts fold
])
def test_normalise(text, want):
    assert normalise(text) == want


def test_normalise_can_keep_articles():
    assert normalise("The letter A.", keep_articles=True) == "the letter a"


@pytest.mark.parametrize("text, answers, ok", [
    ("The capital of France is Paris.", ["Paris"], True),
    ("Paris", ["Paris"], True),
    ("paris.", ["Paris"], True),
    ("Paris is the capital of France.", ["Paris"], True),
    ("The capital of France is Lyon.", ["Paris"], False),
    ("The capital of France is not Paris.", ["Paris"], False),
    ("The capital of Ukraine is Kiev.", ["Kyiv", "Kiev"], True),
    ("A week is seven days.", ["7"], True),
    ("7 + 5 = 12\n\nThis is an example with 13.", ["12"], True),
    ("7 + 5 = 13\n\nThe answer is 12.", ["12"], True),  # a closing "The answer is" counts too
    ("7 + 5 = 13\n\nSo the total is 12.", ["12"], False),  # elsewhere it does not
    ("The plural of sheep is sheeps.", ["sheep"], False),  # the question's echo is not the answer
    ("The opposite of hot is cold.", ["cold"], True),
    ('The first letter of the word "banana" is "B".', ["b"], True),
    ("The answer is 12. Also 7.", ["7"], False),
    ("12 is a larger number than 7.", ["12"], True),
    ("Mexico City is the capital.", ["Mexico City"], True),
    ("The capital of Mexico is Mexico City.<|im_end|>", ["Mexico City"], True),
    ("", ["Paris"], False),
    ('The first letter of the word "apple" is "A".', ["a"], True),
    ('The first letter of the word "apple" is "E".', ["a"], False),
])
def test_is_correct(text, answers, ok):
    assert is_correct(text, answers) is ok


@pytest.mark.parametrize("text, answers, ok", [
    ("Yes, a dolphin is a mammal.", ["yes"], True),
    ("Yes.", ["yes"], True),
    ("No, a dolphin is a mammal.", ["yes"], False),
    ("A dolphin is a mammal, and no fish is.", ["yes"], False),  # no "no" read past the first word
    ("Dolphins breathe air.\n\nThe answer is yes.", ["yes"], True),
    ("Yes, I think so.\n\nThe answer is no.", ["yes"], False),  # the closing statement overrules
    ("No. A spider is an arachnid.", ["no"], True),
    ("An elephant is heavier than a mouse.", ["elephant", "!mouse"], True),
    ("A mouse is heavier than an elephant.", ["elephant", "!mouse"], False),
    ("Elephants weigh far more than mice.", ["elephant", "!mouse"], True),  # no marker: the first option
    ("Between a mouse and an elephant, the elephant is heavier.", ["elephant", "!mouse"], True),
    ("The heavier one is the mouse, not the elephant.", ["elephant", "!mouse"], False),
    ("Mice are small.\n\nThe answer is the elephant.", ["elephant", "!mouse"], True),
    ("Elephants are big.\n\nThe answer is a mouse.", ["elephant", "!mouse"], False),
    ("Mice are small.\n\nThe answer is the elephant, which is heavier than a mouse.", ["elephant", "!mouse"], True),
    ("Dolphins are mammals, not fish.", ["mammal", "!fish", "!bird"], True),
    ("0.3 is larger than 0.25.", ["0.3", "!0.25"], True),
    ("0.25 is larger than 0.3.", ["0.3", "!0.25"], False),
    ("It is a fine question.", ["elephant", "!mouse"], False),  # no option stated
    ("Harry Potter was written by J.K. Rowling. She is British.", ["J. K. Rowling", "Rowling"], True),
    ("It was written by J. R. R. Tolkien in 1937.", ["J. R. R. Tolkien", "Tolkien"], True),
    ("The chemical symbol for carbon is C. It has six protons.", ["C"], True),
    ("The chemical symbol for carbon is O. C is for calcium.", ["C"], False),  # a lone initial ends a sentence
    ("There are 1,000 grams in a kilogram.", ["1000"], True),
    ("3 hours make one hundred and eighty minutes.", ["180"], True),
    ("October is the tenth month of the year.", ["10th", "10"], True),
    ("October is the ninth month of the year.", ["10th", "10"], False),
])
def test_is_correct_on_suite_answers(text, answers, ok):
    """Numbers in words, yes/no answers, wrong options marked "!", names with initials."""
    assert is_correct(text, answers) is ok


# Hand-written long-form outputs: the answer first, then free text; or free text, then a closing "The answer is".
ANSWER_FIRST = ("The capital of Peru is Lima. Here are three facts about Lima:\n\n1. Lima is the largest city in "
                "Peru.\n2. It lies on the Pacific coast.\n3. It was founded in 1535.")
ANSWER_LAST = ("1. Tom has 8 apples.\n2. He gets 7 more apples.\n3. Together that is 8 + 7 = 15 apples.\n\n"
               "The answer is 15.")


@pytest.mark.parametrize("text, answers, ok", [
    (ANSWER_FIRST, ["Lima"], True),
    (ANSWER_FIRST.replace("is Lima.", "is Cusco."), ["Lima"], False),  # Lima only in the free text
    (ANSWER_LAST, ["15"], True),
    (ANSWER_LAST.replace("is 15.", "is 14."), ["15"], False),  # 15 only in the reasoning
    ("Tom has 8 apples. He gets 7 more. So, the answer is 8 + 7 = 15 apples.", ["15"], True),  # after the last =
    ("Tom has 8 apples and gets 7.\n\nThe answer is 8.\n\nWait, the answer is 15.", ["15"], True),  # the last one
    ("Tom has 8 apples and gets 7.\n\nThe answer is 15.\n\nWait, the answer is 8.", ["15"], False),
    ("The answer is: Nairobi. Nairobi is a big city.", ["Nairobi"], True),
    ("1. Rome is the capital of Italy.\n2. It is old.", ["Italy"], True),  # a list item's marker is no sentence
    ("Tom has 4 apples and gets 3 more. The answer is 7. Next, 1 + 1.", ["7"], True),
    ("We count them all.\n\nThe answer is 1. 2 more were lost.", ["1"], True),  # "1." after it is the answer
    ("It is a hard one. The answer is not 15.", ["15"], False),
])
def test_is_correct_on_long_form_outputs(text, answers, ok):
    assert is_correct(text, answers) is ok
    assert check_answer(text, answers) is ok


def test_closing_span_is_the_last_answer_statement():
    assert closing_span(ANSWER_LAST).strip() == "15."
    assert closing_span("The answer is 8 + 7 = 15 apples. More text.").strip() == "15 apples."
    assert closing_span(ANSWER_FIRST) == ""
    assert answer_span("1. The capital of Peru is Lima.\n2. It is big.") == "Lima."


def test_answer_span_is_after_the_first_marker():
    assert answer_span("The capital of Japan is Tokyo. It is big.") == "Tokyo."
    assert answer_span("Tokyo") == "Tokyo"


def test_check_answer_dispatch_keeps_the_toy_checker():
    assert check_answer("so 3 + 4 = 7\n#### 7", 7) and not check_answer("#### 8", 7)
    assert check_answer("#### 7", "7")  # toy answers read back from JSON or CSV as text
    assert check_answer("The answer is 7.", ["7", "seven"]) and not check_answer("The answer is 7.", 7)
    assert check_answer("#### 7", np.int64(7)) and check_answer("It is Paris.", "Paris")
    assert check_answer("Paris.", np.array(["Paris", "Paree"], dtype=object))
    assert accuracy(["#### 7", "Paris.", "Lyon."], [7, ["Paris"], ["Paris"]]) == pytest.approx(2 / 3)
    assert accuracy([], []) == 0.0


def test_accepted_puts_the_canonical_answer_first_without_repeats():
    assert accepted({"answer": "cold", "answers": ["cold", "chilly"]}) == ["cold", "chilly"]
    assert accepted({"answer": 12}) == ["12"]
    assert accepted({"answers": ["Lima", "Lima, Peru"]}) == ["Lima", "Lima, Peru"]  # no "answer": no KeyError


def test_prompt_file_rows_carry_every_accepted_answer(tmp_path):
    class Tok:
        chat_template = None

        def __call__(self, text, add_special_tokens=True):
            return type("Enc", (), {"input_ids": [ord(c) for c in text]})()

    rows = [{"prompt_id": "q", "prompt": "Hi?", "raw": True, "answer": "a", "answers": ["a", "b"]},
            {"prompt_id": "t", "prompt": "2+2?", "answer": 4},
            {"prompt_id": "l", "prompt": "Hi?", "raw": True, "answers": ["c", "d"], "kind": "x"}]
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = read_jsonl_prompts(f, Tok(), chat_template="off")
    assert got[0]["answer"] == ["a", "b"] and got[0]["prompt_ids"] == [ord(c) for c in "Hi?"]
    assert got[1]["answer"] == 4 and got[1]["prompt_ids"] == [ord(c) for c in "Question: 2+2?\nAnswer:"]
    assert got[2]["answer"] == ["c", "d"]  # a row with answers and no answer


def test_shipped_splits_are_well_formed_and_disjoint():
    splits = {s: load_split(s) for s in SPLITS}
    rows = [r for s in SPLITS for r in splits[s]]
    assert len(rows) >= 300
    ids = [r["prompt_id"] for r in rows]
    assert len(set(ids)) == len(ids)
    assert len({r["prompt"] for r in rows}) == len(rows)  # so calib and test share no question
    assert {r["kind"] for r in splits["calib"]} == {r["kind"] for r in splits["test"]}
    for r in rows:
        assert r["raw"] is True and r["prompt"].strip() and r["kind"]
        assert r["answer"] in r["answers"] and all(normalise(a, keep_articles=True) for a in r["answers"])
    assert load_split("test", 3) == splits["test"][:3]
    with pytest.raises(ValueError, match="expected one of"):
        load_split("train")


@pytest.mark.parametrize("prefix, answer, settled", [
    ("The capital of France is Paris. It lies", ["Paris"], True),  # first sentence complete, right
    ("1. Rome is the capital of Italy. It", ["Rome"], True),  # a list marker does not count as a sentence
    ("The capital of France is Paris.\nIt", ["Paris"], True),
    ("The capital of France is Paris.", ["Paris"], False),  # "." could still become "Paris.5" or "Paris. ..."
    ("The capital of France is Paris", ["Paris"], False),  # the sentence is still open ("Paris, Texas")
    ("The capital of France is Lyon. The answer is", ["Paris"], False),  # a closing answer may still come
    ("The capital of France is not Paris. It", ["Paris"], False),
    ("Let me think. The answer is Paris. So", ["Paris"], False),  # answer-last: the first sentence does not state it
    ("x #### 7. More", 7, False),  # the toy checker reads the end
    ("Yes, it is. It", ["yes"], False),  # a yes/no row reads a closing statement first, and one may still come
    ("An elephant is heavier. It", ["elephant", "!mouse"], False),
    ("Its symbol is C. It", ["C"], False),  # the first sentence ends in an initial: "C. S. Lewis" may follow
    ("", ["Paris"], False),
])
def test_answer_settled_hand_written(prefix, answer, settled):
    assert answer_settled(prefix, answer) is settled


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["The capital of France is Paris. ", "Paris is the capital. ", "1. It is Paris.\nThen ",
                        "The answer: Paris! ", "It is Paris. It", "The capital is Lyon. "]),
       st.text(alphabet=st.characters(codec="ascii"), max_size=40))
def test_a_settled_prefix_is_accepted_whatever_follows(prefix, rest):
    """The label stage skips the rollout of a settled prefix: no continuation may change the checker's verdict."""
    if answer_settled(prefix, ["Paris"]):
        assert check_answer(prefix + rest, ["Paris"])
