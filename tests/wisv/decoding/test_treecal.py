"""Calibrated candidate scores for draft trees: fitting, scoring, per-token rates, round trip, ranking in a tree."""
import math

import pytest
import torch

from tests.tiny_pair import make_pair
from wisv.decoding.lossless import check_lossless
from wisv.decoding.tree import build_tree
from wisv.decoding.treecal import Calibration, collect, fit
from wisv.decoding.treespec import tree_generate
from wisv.tasks.evaluate import greedy_reference


def _positions(n: int = 40):
    """n positions where the drafter says token 1 (0.55) over token 2 (0.40) but the target picks 2 every time,
    and n where the drafter's 0.999 top-1 (token 3) is right."""
    top_p = torch.tensor([[0.55, 0.40, 0.03, 0.01]] * n + [[0.999, 0.0005, 0.0003, 0.0001]] * n)
    top_ids = torch.tensor([[1, 2, 4, 5]] * n + [[3, 6, 7, 8]] * n)
    return top_p, top_ids, torch.tensor([2] * n + [3] * n)


def _logp(probs: dict[int, float], v: int = 10) -> torch.Tensor:
    p = torch.full((v,), 1e-6)
    for t, q in probs.items():
        p[t] = q
    return (p / p.sum()).log()


def test_fit_counts_hits_per_rank_and_bin_with_shrinkage():
    cal = fit(*_positions(), alpha=4.0)
    assert cal.table[0][7] == pytest.approx(4 * 0.55 / 44, abs=1e-6)  # bin [0.5, 0.6): 0 hits in 40
    assert cal.table[1][6] == pytest.approx((40 + 4 * 0.40) / 44, abs=1e-6)  # bin [0.4, 0.5): 40 hits in 40
    assert cal.table[0][14] == pytest.approx((40 + 4 * 0.999) / 44, abs=1e-6)
    assert cal.table[3][9] == pytest.approx(0.75, abs=1e-6)  # an empty cell: the bin's midpoint


def test_score_reranks_and_keeps_the_tail_raw():
    cal = fit(*_positions())
    logp = _logp({1: 0.52, 2: 0.40, 9: 0.07})
    s = cal.score(logp[None])[0]
    assert int(s.argmax()) == 2  # the target's habitual pick beats the drafter's top-1
    assert s[9] == pytest.approx(math.log(cal.table[2][2]), abs=1e-4)  # rank 2, bin [0.05, 0.1)
    assert s[0] == pytest.approx(float(logp[0]), abs=1e-4)  # past the table's ranks: the drafter's own log-prob
    assert torch.all(s <= 0)


def test_per_token_rates_shrink_towards_the_cell():
    top_p, top_ids, y = _positions()
    top_ids[:40, 1] = torch.tensor([2, 7] * 20)  # rank 1: token 2 (right) half the time, token 7 (wrong) otherwise
    y[:40] = top_ids[:40, 1]
    y[1:40:2] = 4  # token 7 is never the target's choice
    cal = fit(top_p, top_ids, y, by_token=True)
    s2 = cal.score(_logp({1: 0.55, 2: 0.40})[None])[0, 2].exp()
    s7 = cal.score(_logp({1: 0.55, 7: 0.40})[None])[0, 7].exp()
    cell = cal.table[1][6]
    assert s2 == pytest.approx((20 + 4 * cell) / 24, abs=1e-4) and s7 == pytest.approx(4 * cell / 24, abs=1e-4)
    back = Calibration.from_dict(cal.to_dict())
    logp = _logp({1: 0.5, 7: 0.3, 2: 0.15})[None]
    assert torch.equal(back.score(logp), cal.score(logp))


def test_calibrated_scores_steer_the_best_first_tree():
    cal = fit(*_positions())
    root = _logp({1: 0.55, 2: 0.40})
    table = {1: _logp({3: 0.999}), 2: _logp({3: 0.999}), 3: _logp({3: 0.999})}
    expand = lambda tree, nodes: torch.stack([table.get(tree.tokens[i], _logp({3: 0.999})) for i in nodes])  # noqa: E731
    raw = build_tree(root, expand, budget=3)
    calibrated = build_tree(cal.score(root), lambda t, n: cal.score(expand(t, n)), budget=3)
    assert raw.tokens[0] == 1 and calibrated.tokens == [2, 3, 3]  # the calibrated chain follows the target's pick


@pytest.mark.parametrize("children", [1, None])
def test_calibrated_tree_and_chain_decoding_stay_lossless(children):
    drafter, target = make_pair("llama", 32, 2, 4, 2)
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(1, 60, (6,), generator=gen).tolist() for _ in range(3)]
    cal = fit(*collect(drafter, target, prompts[:2], 20), by_token=True)
    for prompt in prompts:
        ref = greedy_reference(target, prompt, max_new_tokens=30)
        out = tree_generate(drafter, target, prompt, max_new_tokens=30, budget=6, score=cal.score, children=children)
        assert check_lossless(target, prompt, ref, out.tokens).ok
        if children == 1:
            assert all(r.depth == r.size for r in out.rounds)  # a chain
