"""Generated text for people: outputs.jsonl's text fields, the progress line, and --show's marked divergence."""
from __future__ import annotations

import pandas as pd
import pytest

from testbed.common.text import MARK, first_divergence, marked, progress_line, show, text_fields

WORDS = {1: "Jack", 2: " has", 3: " 96", 4: " 95", 5: ".", 6: "\n####"}
decode = lambda ids: "".join(WORDS[i] for i in ids)  # noqa: E731


@pytest.mark.parametrize("out, ref, at", [
    ([1, 2, 3, 5], [1, 2, 3, 5], None),
    ([1, 2, 4, 5], [1, 2, 3, 5], 2),
    ([7, 2], [1, 2], 0),
    ([1, 2], [1, 2, 3], 2),  # stopped early
    ([1, 2, 3, 5, 6], [1, 2, 3, 5], 4),  # went on
    ([], [], None),
])
def test_first_divergence(out, ref, at):
    assert first_divergence(out, ref) == at


def test_marked_text_shows_where_it_leaves_the_reference():
    assert marked(decode, [1, 2, 4, 5], [1, 2, 3, 5]) == f"Jack has{MARK} 95.  (diverges at token 2 of 4)"
    assert marked(decode, [1, 2, 3, 5, 6], [1, 2, 3, 5, 6]) == "Jack has 96.⏎####  (= reference)"
    assert marked(decode, [1], None) == "Jack  (no reference)"


def test_text_fields_only_with_a_tokenizer():
    assert text_fields(decode, [1, 2], [3, 5]) == {"prompt_text": "Jack has", "text": " 96."}
    assert text_fields(None, [1, 2], [3, 5]) == {}


def test_progress_line():
    rec = {"prompt_id": "p7", "tokens": [1, 2, 3], "rounds": 2, "t_e2e_s": 0.456, "text": "Jack has\n 96"}
    assert progress_line(3, 20, rec) == "[3/20] p7: 3 tokens in 2 rounds, 0.46 s: 'Jack has 96'"
    assert progress_line(1, 2, {"prompt_id": "p1", "error": "timeout"}) == "[1/2] p1: failed: timeout"


def test_show_puts_each_protocol_beside_the_reference():
    prompts = pd.DataFrame({"prompt_id": ["a", "b"], "prompt_ids": [[1], [2]]})
    outputs = {"greedy": pd.DataFrame({"prompt_id": ["a", "b"], "tokens": [[1, 2, 3], [2]], "error": [None, None]}),
               "sh": pd.DataFrame({"prompt_id": ["a", "b"], "tokens": [[1, 2, 4], []], "error": [None, "timeout"]})}
    text = show(1, prompts, outputs, {"a": [1, 2, 3]}, decode)
    assert text.splitlines() == ["=== a", "prompt:     Jack", "reference:  Jack has 96",
                                 "greedy:     Jack has 96  (= reference)",
                                 f"sh:         Jack has{MARK} 95  (diverges at token 2 of 3)"]
    assert "(failed: timeout)" in show(2, prompts, outputs, None, decode)
    assert show(1, prompts, outputs, None, None).startswith("--show: no tokenizer")
