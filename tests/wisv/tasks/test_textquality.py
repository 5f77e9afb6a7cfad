"""Drift (ROUGE-L F1) and fluency (the target's perplexity ratio) on hand-built texts: an identical text, a synonym
swap and a word fragment; the NLL forward against one-by-one scoring."""
import math

import pytest
import torch

from tests.tiny_pair import make_pair
from wisv.tasks.textquality import perplexity_ratio, pooled_ppl_ratio, rouge_l_f1, text_quality, token_nll

REF = "The capital of France is Paris. It lies on the Seine and is known for its passive voice museums."
SYNONYM = "The capital of France is Paris. It lies on the Seine and is famous for its passive voice museums."
FRAGMENT = "The capital of France is Paris. It lies on the Seine and is known for its passivequate museums."


def test_rouge_l_identical_synonym_fragment():
    assert rouge_l_f1(REF, REF) == pytest.approx(1.0)
    syn, frag = rouge_l_f1(SYNONYM, REF), rouge_l_f1(FRAGMENT, REF)
    n = 19  # words of REF under rouge-score's tokeniser
    assert syn == pytest.approx(18 / n)  # one word swapped: 18 of 19 words in common on both sides
    assert frag == pytest.approx(2 * (17 / 18) * (17 / n) / (17 / 18 + 17 / n))  # two words fused into one
    assert frag < syn < 1.0
    assert rouge_l_f1("", "") == 1.0 and rouge_l_f1("", REF) == 0.0


def test_perplexity_ratio_hand_values():
    assert perplexity_ratio([0.5, 0.5], [0.5, 0.5, 0.5]) == pytest.approx(1.0)  # same mean NLL: identical fluency
    assert perplexity_ratio([0.5, 0.5 + 2 * math.log(4)], [0.5, 0.5]) == pytest.approx(4.0)  # one token 16x less likely
    assert math.isnan(perplexity_ratio([], [1.0]))


def test_text_quality_pools_tokens():
    q = text_quality([REF, SYNONYM], [REF, REF], [[1.0], [1.0, 3.0]], [[1.0], [1.0, 1.0]])
    assert q["drift_rouge_l"] == pytest.approx((1 + 18 / 19) / 2)
    assert q["fluency_ppl_ratio"] == pytest.approx(math.exp(5 / 3 - 1))  # pooled: mean over all tokens
    assert math.isnan(text_quality([REF], [REF])["fluency_ppl_ratio"])
    assert math.isnan(q["fluency_ext_ppl_ratio"])  # no third-model NLLs: not measured
    with pytest.raises(ValueError):
        text_quality([REF], [])


@pytest.mark.parametrize("nlls, ref_nlls, expected", [
    ([[1.0, 1.0]], [[1.0]], 1.0),  # same mean NLL: as fluent as the reference
    ([[2.0], [2.0, 2.0]], [[1.0], [1.0]], math.e),  # one nat more per token: e times the perplexity
    ([[0.5]], [[1.5, 1.5]], math.exp(-1)),  # the third model may find the output *more* fluent than the reference
    ([[3.0], []], [[1.0], [1.0, 1.0]], math.exp(3.0 - 1.0)),  # pooled over tokens: an empty output adds none
])
def test_pooled_ppl_ratio_hand_values(nlls, ref_nlls, expected):
    assert pooled_ppl_ratio(nlls, ref_nlls) == pytest.approx(expected)


def test_pooled_ppl_ratio_nan_and_mismatch():
    assert math.isnan(pooled_ppl_ratio(None, [[1.0]])) and math.isnan(pooled_ppl_ratio([[]], [[1.0]]))
    with pytest.raises(ValueError):
        pooled_ppl_ratio([[1.0]], [[1.0], [1.0]])


def test_text_quality_scores_each_model_apart():
    """The target's NLLs make fluency_ppl_ratio, the third model's make fluency_ext_ppl_ratio: a synonym the target
    would not have picked costs under the target and nothing under a model that finds both words alike."""
    q = text_quality([SYNONYM], [REF], [[0.1, 2.0]], [[0.1, 0.1]], [[0.7, 0.7]], [[0.7, 0.7]])
    assert q["fluency_ppl_ratio"] == pytest.approx(math.exp(0.95))
    assert q["fluency_ext_ppl_ratio"] == pytest.approx(1.0)


def test_token_nll_batched_equals_single_and_ranks_a_fragment_worse():
    _, target = make_pair(vocab=61, eos=60, pad=0)
    prompts, outs = [[1, 5, 9], [1, 7, 7, 7, 3]], [[4, 8, 15], [16, 23]]
    batched = token_nll(target, prompts, outs)
    for p, o, b in zip(prompts, outs, batched):
        assert b == pytest.approx(token_nll(target, [p], [o])[0], abs=1e-4)
    with torch.no_grad():
        logits = target(torch.tensor([prompts[0]])).logits[0, -1]
    greedy = int(logits.argmax())
    worst = int(logits.argmin())
    good, bad = token_nll(target, [prompts[0]] * 2, [[greedy], [worst]])
    assert perplexity_ratio(bad, good) > 1.0 and perplexity_ratio(good, good) == pytest.approx(1.0)


def test_token_nll_queries_score_other_tokens_from_the_same_pass():
    """A queried (position, token) pair's NLL equals scoring that token as the output at that point."""
    _, target = make_pair(vocab=61, eos=60, pad=0)
    prompts, outs = [[1, 5, 9], [1, 7, 7, 7, 3]], [[4, 8, 15], [16, 23]]
    queries = [[(2, 33), (4, 59)], [(5, 2)]]  # (index of the position that predicts it, token)
    nlls, extra = token_nll(target, prompts, outs, queries=queries)
    assert nlls == token_nll(target, prompts, outs)
    seqs = [p + o for p, o in zip(prompts, outs)]
    for i, q in enumerate(queries):
        for (at, tok), got in zip(q, extra[i]):
            want = token_nll(target, [seqs[i][:at + 1]], [[tok]])[0][0]
            assert got == pytest.approx(want, abs=1e-4)
    with pytest.raises(ValueError):
        token_nll(target, prompts, outs, queries=[[(9, 1)], []])
