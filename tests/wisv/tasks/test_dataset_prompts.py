"""A named dataset becomes prompt rows in the one place prompts become token ids: the chat template applied, category,
turn and question kept through prompt files, and a two-turn question's second turn built on a first answer."""
from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from tests.testbed.conftest import TOKENIZER_DIR
from wisv.tasks.datasets import load_dataset
from wisv.tasks.jsonl import write_jsonl
from wisv.tasks.prompts import (
    TURN_JOIN,
    answer_text,
    dataset_rows,
    encode_messages,
    encode_prompt,
    prompt_rows,
    second_turn_rows,
)

TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")  # a small chat template


@pytest.fixture
def plain():
    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)  # the built-in tokenizer: no chat template


@pytest.fixture
def chat(plain):
    plain.chat_template = TEMPLATE
    return plain


def test_first_turns_through_the_chat_template_with_their_labels(chat):
    rows = prompt_rows(chat, "test", 3, dataset="mt-bench")
    q = load_dataset("mt-bench")[0]
    assert rows[0]["prompt_ids"] == encode_prompt(chat, q.turns[0])
    assert chat.decode(rows[0]["prompt_ids"]) == f"<|user|>{q.turns[0]}\n<|assistant|>"
    assert [(r["prompt_id"], r["category"], r["turn"], r["question_id"]) for r in rows] == [
        (f"spec-bench-{i}", "writing", 1, f"spec-bench-{i}") for i in (81, 82, 83)]
    assert all(r["turns"] == list(load_dataset("mt-bench")[i].turns) for i, r in enumerate(rows))  # 2nd turn waits
    assert all("turns" not in r for r in prompt_rows(chat, "test", 3, dataset="mt-bench", first_turn_only=True))


def test_the_answers_a_scorer_reads_ride_along(plain):
    gsm = prompt_rows(plain, "test", 2, dataset="gsm8k")
    assert gsm[0]["answer"].endswith("#### 18") and gsm[0]["category"] == "math_reasoning"
    tr = prompt_rows(plain, "test", 1, dataset="spec-bench:translation")[0]
    assert tr["answer"] is None and tr["reference"] == load_dataset("spec-bench:translation")[0].references[0]
    with pytest.raises(ValueError, match="every row needs an answer"):
        prompt_rows(plain, "test", 1, dataset="spec-bench:qa", need_answers=True)
    assert prompt_rows(plain, "test", 1, dataset="gsm8k", need_answers=True)


def test_the_second_turn_feeds_the_first_answer_back(chat):
    rows = dataset_rows(chat, "mt-bench", 2)
    answers = {"spec-bench-81": "Aloha from Hawaii.", "spec-bench-82": "Dear supervisor, ..."}
    both = second_turn_rows(chat, rows, answers)
    assert [(r["prompt_id"], r["turn"], r["question_id"]) for r in both] == [
        ("spec-bench-81", 1, "spec-bench-81"), ("spec-bench-81-t2", 2, "spec-bench-81"),
        ("spec-bench-82", 1, "spec-bench-82"), ("spec-bench-82-t2", 2, "spec-bench-82")]
    t1, t2 = load_dataset("mt-bench")[0].turns
    assert chat.decode(both[1]["prompt_ids"]) == (f"<|user|>{t1}\n<|assistant|>Aloha from Hawaii.\n"
                                                  f"<|user|>{t2}\n<|assistant|>")
    assert both[1]["category"] == "writing" and all("turns" not in r for r in both)
    assert both[0]["prompt_ids"] == rows[0]["prompt_ids"]  # the first turn is untouched


def test_without_a_template_the_conversation_is_joined_by_blank_lines(plain):
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Bye"}]
    assert encode_messages(plain, msgs) == plain(TURN_JOIN.join(["Hi", "Hello", "Bye"])).input_ids
    assert encode_messages(plain, msgs[:1]) == encode_prompt(plain, "Hi") == plain("Hi").input_ids


def test_an_answer_is_fed_back_without_special_tokens(plain):
    ids = plain(" The answer").input_ids + [plain.eos_token_id]
    assert answer_text(plain, ids) == "The answer"


def test_labels_survive_a_prompt_file(chat, tmp_path):
    rows = second_turn_rows(chat, dataset_rows(chat, "mt-bench", 1), {"spec-bench-81": "A."})
    rows += dataset_rows(chat, "spec-bench:translation", 1)
    f = tmp_path / "prompts.jsonl"
    write_jsonl(f, rows)  # what the run writes for its UEs
    back = prompt_rows(chat, "test", None, str(f))
    keys = ("prompt_id", "prompt_ids", "answer", "category", "turn", "question_id")
    assert [{k: r[k] for k in keys} for r in back] == [{k: r[k] for k in keys} for r in rows]
    assert back[-1]["reference"] == rows[-1]["reference"]
