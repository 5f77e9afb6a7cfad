"""Padding a verification pass to a cheaper shape: the pure rules, and a padded pass that changes no row, no cache slot
and no token."""
import pytest
import torch

from tests.tiny_pair import make_pair
from wisv.decoding.lossless import check_lossless
from wisv.decoding.passrows import cheapest_rows, pad_count, pad_plan, read_plan
from wisv.decoding.sessions import VerifySession
from wisv.decoding.speculative import RejectAll, speculative_generate
from wisv.tasks.evaluate import greedy_reference

MEASURED = {1: 56.5, 2: 97.5, 3: 119.2, 4: 83.3, 5: 98.7, 6: 96.8, 7: 107.2, 8: 99.0}  # issue 43's machine, SmolLM2, ms


def test_pad_count_follows_the_plan():
    plan = {2: 4, 3: 4, 7: 8}
    assert [pad_count(r, plan) for r in (1, 2, 3, 4, 7, 9)] == [0, 2, 1, 0, 1, 0]
    assert pad_count(3, None) == pad_count(3, {}) == 0
    with pytest.raises(ValueError, match="at least one row"):
        pad_count(0, plan)


def test_the_plan_follows_the_measured_costs_beyond_a_margin():
    assert [cheapest_rows(MEASURED, r) for r in (1, 2, 3, 4, 5, 7, 8)] == [1, 4, 4, 4, 5, 8, 8]  # 6 is < 5% off 5
    assert cheapest_rows(MEASURED, 9) == 9  # not measured: as it is
    assert cheapest_rows(MEASURED, 5, margin=0.0) == 6
    assert pad_plan(MEASURED) == {2: 4, 3: 4, 7: 8}
    assert pad_plan({1: 60.0, 2: 70.0, 3: 80.0}) == {}  # cost grows with rows: no padding
    assert pad_plan({1: 60.0, 2: 90.0, 3: 90.0}, margin=0.0) == {}  # a tie goes to the fewer rows
    with pytest.raises(ValueError, match="margin"):
        cheapest_rows(MEASURED, 2, margin=1.0)


def test_a_plan_is_read_from_a_benchmark_and_checked():
    assert read_plan({"target_pad_plan": {"2": 4, "3": 4}}) == {2: 4, 3: 4}
    for bad in ({}, {"target_pad_plan": {"2": "x"}}, {"target_pad_plan": {"4": 2}}, {"target_pad_plan": [1]},
                {"target_pad_plan": {"2": 10**9}}):
        with pytest.raises(ValueError, match="target_pad_plan"):
            read_plan(bad)


@pytest.fixture(scope="module")
def pair():
    return make_pair("llama", 32, 2, 4, 2)


def test_a_padded_pass_gives_the_same_rows_and_cache(pair):
    _, target = pair
    plain, padded = (VerifySession(target, [1, 2, 3, 4], pad_to=p) for p in (None, {2: 6, 3: 5, 7: 9}))
    for draft, accepted in (([7, 8], 1), ([9], 0), ([10, 11, 12, 13, 14, 15], 6)):
        a, b = plain.verify(draft), padded.verify(draft)
        assert b.logits.shape == a.logits.shape and b.hidden.shape == a.hidden.shape
        assert torch.allclose(a.logits, b.logits, atol=1e-5) and torch.equal(a.argmax, b.argmax)
        assert padded.cached_len == plain.cached_len == len(plain.seq) + len(draft)
        nxt = int(a.argmax[accepted])
        assert plain.commit(draft, accepted, nxt) == padded.commit(draft, accepted, nxt)
        assert padded.cached_len == plain.cached_len and padded.cache.get_seq_length() == padded.cached_len


PLAN = {2: 5, 3: 5, 4: 5, 9: 12}


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_padded_greedy_sd_is_lossless_with_the_same_rounds(pair, k):
    drafter, target = pair
    for prompt in ([1, 2, 3], [5, 9, 11, 2, 7]):
        ref = greedy_reference(target, prompt, max_new_tokens=40)
        plain, padded = (speculative_generate(drafter, target, prompt, max_new_tokens=40, draft_len=k, pad_to=p)
                         for p in (None, PLAN))
        assert check_lossless(target, prompt, ref, padded.tokens).ok
        assert padded.tokens == plain.tokens
        assert [r.accepted for r in padded.rounds] == [r.accepted for r in plain.rounds]


def test_padding_keeps_the_sibling_pass(pair):
    drafter, target = pair
    runs = [speculative_generate(drafter, target, [1, 2, 3], max_new_tokens=24, draft_len=2, rule="wisv",
                                 policy=RejectAll(), sibling=True, pad_to=p) for p in (None, PLAN)]
    assert runs[0].tokens == runs[1].tokens
    assert [r.edge is None for r in runs[0].rounds] == [r.edge is None for r in runs[1].rounds]
