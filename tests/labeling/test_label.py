"""Base labels: left-padded batched continuations equal one-by-one greedy decoding; checker and report helpers."""
import pandas as pd
import pytest

from labeling.label import batched_greedy, forced_prefixes, report, resolve_checker
from tests.tiny_pair import make_pair
from wisv.tasks.evaluate import greedy_reference


def test_batched_greedy_equals_single_greedy_for_unequal_prefixes():
    _, target = make_pair(vocab=61, eos=60, pad=0)
    prefixes = [[1, 5, 9, 33, 40, 7, 8], [1, 7], [1, 20, 30, 40]]
    batched = batched_greedy(target, prefixes, 12, pad_id=0)
    assert batched == [greedy_reference(target, p, 12) for p in prefixes]


def test_forced_prefix_puts_the_draft_token_after_the_greedy_path():
    ep = {"prompt_ids": [1, 2], "output_ids": [10, 11, 12, 13]}
    assert forced_prefixes(ep, [0, 2], [99, 98]) == [[1, 2, 99], [1, 2, 10, 11, 98]]


def test_checker_resolution():
    fn = resolve_checker("wisv.tasks.toydata:is_correct")
    assert fn("x #### 7", 7) and not fn("x #### 8", 7)
    for bad in ("wisv.tasks.toydata:nope", "no_such_module:f", "wisv.tasks.toydata:MAX_VALUE"):
        with pytest.raises(ValueError):
            resolve_checker(bad)


def test_report_breaks_down_by_kind():
    df = pd.DataFrame({"kind": ["word-word"] * 3 + ["digit-digit"], "critical": [0, 0, 1, 1]})
    text = report(df)
    assert "critical fraction 0.500" in text and "digit-digit" in text and "word-word" in text
