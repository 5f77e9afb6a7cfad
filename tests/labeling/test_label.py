"""Base labels: left-padded batched continuations equal one-by-one greedy decoding; the harm label on a tiny pair;
checker and report helpers."""
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from labeling.config import LabelConfig
from labeling.label import batched_greedy, forced_prefixes, label_rows, report, resolve_checker
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
    df = pd.DataFrame({"episode": [0, 0, 1, 1], "kind": ["word-word"] * 3 + ["digit-digit"], "harmful": [0, 0, 1, 1],
                       "helpful": [1, 0, 0, 0]})
    text = report(df)
    assert "harmful 0.500" in text and "helpful 0.250" in text and "digit-digit" in text and "word-word" in text


def test_label_rows_marks_an_unlikely_forced_token_disfluent_and_keeps_outcomes_apart():
    """The checker passes the target's own output only; forcing its second choice is fluent, its least likely
    token is not (the window ratio exceeds the bound), and either forced text fails the checker: turns wrong."""
    _, target = make_pair(vocab=61, eos=60, pad=0)
    prompt = [1, 5, 9]
    own = greedy_reference(target, prompt, 6)
    with torch.no_grad():
        logits = target(torch.tensor([prompt + own[:2]])).logits[0, -1]
    second, worst = int(logits.argsort()[-2]), int(logits.argmin())
    ep = {"prompt_ids": prompt, "output_ids": own, "answer": own, "outcome": True}
    tr = {"episode": [0, 0], "position": [2, 2], "draft_id": [second, worst], "target_id": [own[2], own[2]]}
    tok = SimpleNamespace(pad_token_id=0, decode=lambda ids: " ".join(map(str, ids)), convert_ids_to_tokens=str)
    checker = lambda text, answer: text == " ".join(map(str, answer))  # noqa: E731
    cfg = LabelConfig(batch=2, fluency_window=1, max_ppl_ratio=1.5)
    df = label_rows(target, tok, [ep], tr, checker, 6, cfg)
    assert list(df["turns_wrong"]) == [1, 1] and list(df["helpful"]) == [0, 0] and list(df["harmful"]) == [1, 1]
    assert df["ppl_ratio"][1] > df["ppl_ratio"][0] > 1.0 and df["disfluent"][1] == 1


def test_subsample_spreads_over_the_traces():
    from labeling.label import subsample
    assert subsample(10, None) == list(range(10)) and subsample(10, 20) == list(range(10))
    assert subsample(10, 4) == [0, 3, 6, 9] and subsample(10, 5) == [0, 2, 4, 6, 8]
    with pytest.raises(ValueError):
        subsample(10, 0)


def test_settled_mismatches_generate_only_the_window_and_keep_their_labels():
    """With a settled-prefix test, mismatches after the settled point roll out only the fluency window; their labels,
    outcomes and window perplexity ratios equal the full rollouts', and the ratio equals a direct scoring of the
    forced window against the target's own tokens."""
    from labeling.harm import window_ppl_ratio
    from wisv.tasks.textquality import token_nll
    _, target = make_pair(vocab=61, eos=60, pad=0)
    prompt = [1, 5, 9]
    own = greedy_reference(target, prompt, 10)
    ep = {"prompt_ids": prompt, "output_ids": own, "answer": own[:2], "outcome": True}
    positions = [1, 3, 4, 6]
    drafts = [(own[j] + 7) % 59 + 1 for j in positions]
    tr = {"episode": [0] * 4, "position": positions, "draft_id": drafts, "target_id": [own[j] for j in positions]}
    tok = SimpleNamespace(pad_token_id=0, decode=lambda ids: " ".join(map(str, ids)), convert_ids_to_tokens=str)
    checker = lambda text, answer: text.split()[:2] == [str(a) for a in answer]  # noqa: E731
    settled = lambda text, answer: text.split()[:2] == [str(a) for a in answer]  # noqa: E731
    cfg = LabelConfig(batch=3, fluency_window=3, max_ppl_ratio=1.5)
    full = label_rows(target, tok, [ep], tr, checker, 10, cfg)
    fast = label_rows(target, tok, [ep], tr, checker, 10, cfg, settled)
    assert list(fast["settled"]) == [0, 1, 1, 1] and list(full["settled"]) == [0, 0, 0, 0]
    assert list(fast["turns_wrong"]) == [1, 0, 0, 0]  # forcing position 1 breaks the answer
    for col in ("outcome_forced", "harmful", "disfluent", "helpful"):
        assert list(fast[col]) == list(full[col])
    assert list(fast["ppl_ratio"]) == pytest.approx(list(full["ppl_ratio"]), rel=1e-4)
    own_nll = token_nll(target, [prompt], [own])[0]
    for j, d, got in zip(positions, drafts, fast["ppl_ratio"]):
        cont = greedy_reference(target, prompt + own[:j] + [d], 2)
        forced = token_nll(target, [prompt + own[:j]], [[d] + cont])[0]
        assert got == pytest.approx(window_ppl_ratio(forced, own_nll[j:j + 3], 3), rel=1e-3)
