"""The label stage's two engines agree: the cached one (each episode's KV cache reused, labeling/forced.py) gives
the batched one's continuations, NLLs and label rows on a tiny pair."""
from dataclasses import replace
from types import SimpleNamespace

import pytest

from labeling.config import LabelConfig
from labeling.forced import Job, cached_greedy, episode_groups, episode_pass
from labeling.label import batched_greedy, label_rows
from tests.tiny_pair import make_pair
from wisv.tasks.evaluate import greedy_reference
from wisv.tasks.textquality import token_nll

PROMPTS = [[1, 5, 9], [1, 7, 3, 22, 41, 8, 13], [1, 30]]  # unequal lengths: the batch is left-padded


def _episodes(target, budget):
    return [{"prompt_ids": p, "output_ids": greedy_reference(target, p, budget)} for p in PROMPTS]


def test_cached_greedy_equals_batched_greedy_from_each_episode_cache():
    """Rows from three episodes' caches, each forced with another token and given its own number of steps (so the
    batch sheds rows): the same tokens and NLLs as left-padded generation over prompt + prefix + draft token."""
    _, target = make_pair(vocab=61, eos=60, pad=0)
    eps = _episodes(target, 12)
    passes = [episode_pass(target, e["prompt_ids"], e["output_ids"], []) for e in eps]
    rows = [(0, 2, 17, 9), (1, 0, 44, 3), (2, 5, 8, 6), (0, 7, 31, 1), (1, 4, 12, 9)]  # episode, j, draft, steps
    conts, nlls = cached_greedy(target, [passes[e].cache for e, *_ in rows],
                                [len(eps[e]["prompt_ids"]) + j for e, j, _, _ in rows],
                                [d for *_, d, _ in rows], [s for *_, s in rows])
    for (e, j, d, s), cont, nll in zip(rows, conts, nlls):
        prefix = eps[e]["prompt_ids"] + eps[e]["output_ids"][:j] + [d]
        (ref,), (ref_nll,) = batched_greedy(target, [prefix], s, 0, with_nll=True)
        assert cont == ref and len(cont) == s
        assert nll == pytest.approx(ref_nll, rel=1e-4, abs=1e-5)


def test_episode_pass_nlls_equal_token_nll():
    _, target = make_pair(vocab=61, eos=60, pad=0)
    e = _episodes(target, 10)[1]
    p = episode_pass(target, e["prompt_ids"], e["output_ids"], [(3, 29), (0, 5)])
    own, (drafts,) = token_nll(target, [e["prompt_ids"]], [e["output_ids"]], 0,
                               queries=[[(len(e["prompt_ids"]) + 2, 29), (len(e["prompt_ids"]) - 1, 5)]])
    assert p.own_nll == pytest.approx(own[0], rel=1e-4)
    assert [p.draft_nll[(3, 29)], p.draft_nll[(0, 5)]] == pytest.approx(drafts, rel=1e-4)
    assert p.cache.get_seq_length() == len(e["prompt_ids"]) + len(e["output_ids"])


def test_episode_groups_keep_episodes_whole():
    jobs = [Job(e, 0, 0, 1) for e in (0, 0, 0, 1, 2, 2, 3)]
    assert list(episode_groups(jobs, 2)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(episode_groups(jobs, 100)) == [list(range(7))]


@pytest.mark.parametrize("settled", [False, True])
def test_engines_give_the_same_label_rows(settled):
    """Mismatches over three episodes, with and without the settled shortcut (rows of unequal steps in a batch):
    identical labels and outcomes, and the same NLLs and window ratios up to float noise."""
    _, target = make_pair(vocab=61, eos=60, pad=0)
    budget = 12
    eps = _episodes(target, budget)
    for e in eps:
        e["answer"], e["outcome"] = e["output_ids"][:3], True
    mism = [(e, j) for e in range(3) for j in (0, 1, 2, 4, 6, 9, 11)]
    tr = {"episode": [e for e, _ in mism], "position": [j for _, j in mism],
          "draft_id": [(eps[e]["output_ids"][j] * 7 + j) % 59 + 1 for e, j in mism],
          "target_id": [eps[e]["output_ids"][j] for e, j in mism]}
    tok = SimpleNamespace(pad_token_id=0, decode=lambda ids: " ".join(map(str, ids)), convert_ids_to_tokens=str)
    checker = lambda text, answer: text.split()[:3] == [str(a) for a in answer]  # noqa: E731
    cfg = LabelConfig(batch=4, fluency_window=4, max_ppl_ratio=1.5)
    fn = checker if settled else None
    cached = label_rows(target, tok, eps, tr, checker, budget, cfg, fn)
    batched = label_rows(target, tok, eps, tr, checker, budget, replace(cfg, engine="batched"), fn)
    assert cached["settled"].sum() == (sum(j >= 3 for _, j in mism) if settled else 0)
    assert cached["turns_wrong"].sum() > 0  # the checker sees the forced text
    exact = ["row", "episode", "position", "draft_id", "settled", "outcome_forced", "turns_wrong", "turns_right",
             "disfluent", "harmful", "helpful", "changed"]
    assert cached[exact].equals(batched[exact])
    for col in ("nll_draft", "nll_target", "ppl_ratio"):
        assert list(cached[col]) == pytest.approx(list(batched[col]), rel=1e-4)


def test_bench_agreement_names_the_rows_that_differ():
    """scripts/bench_label's comparison: a flipped label, a continuation that differs only past the ratio's window,
    and one that differs inside it, each named; float columns by their largest relative difference."""
    import pandas as pd

    from scripts.bench.label import CLOSE, EXACT, agreement
    a = pd.DataFrame({c: [0, 0, 0] for c in EXACT} | {c: [1.0, 2.0, 4.0] for c in CLOSE} | {"row": [0, 1, 2]})
    b = a.copy()
    b.loc[1, "harmful"], b.loc[2, "ppl_ratio"] = 1, 5.0
    conts_a, conts_b = {0: [1, 2, 3, 4], 1: [5, 6], 2: [7]}, {0: [1, 2, 3, 9, 9], 1: [5, 8], 2: [7, 1, 1]}
    got = agreement(a, b, conts_a, conts_b, window=3)
    assert not got["labels_agree"] and got["rows_with_other_labels"] == [1]
    assert got["rows_with_other_continuations"] == [0, 1] and got["rows_with_other_window_tokens"] == [1]
    assert got["max_rel_diff"]["ppl_ratio"] == pytest.approx(0.2) and got["max_rel_diff"]["nll_draft"] == 0
    assert agreement(a, a, conts_a, conts_a, 3)["labels_agree"]
