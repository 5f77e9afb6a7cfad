"""The edge's free features at a mismatch, from hand-built logits (wisv/head/features.py)."""
from __future__ import annotations

import math

import pytest
import torch

from wisv.head.features import SCALARS, EdgeFeatures, edge_features, lookahead_runs


@pytest.mark.parametrize("draft, argmax, positions, want", [
    ([1, 2, 3, 4], [1, 9, 3, 4, 0], [1], [2]),  # the two tokens after the mismatch agree
    ([1, 2, 3, 4], [9, 2, 9, 4, 0], [0, 2], [1, 1]),  # the run stops at the next mismatch
    ([1, 2, 3, 4], [1, 2, 3, 9, 0], [3], [0]),  # the last draft token: nothing after it
    ([5, 6], [7, 8, 0], [0, 1], [0, 0]),
])
def test_lookahead_runs(draft, argmax, positions, want):
    assert lookahead_runs(draft, argmax, positions) == want


def block(rows: list[dict[int, float]], vocab: int = 6) -> torch.Tensor:
    """Logits [len(rows), vocab] with the given log-probabilities' shape: unlisted tokens get -inf-ish."""
    lg = torch.full((len(rows), vocab), -30.0)
    for i, r in enumerate(rows):
        for t, v in r.items():
            lg[i, t] = v
    return lg


def test_edge_features_against_hand_computed_values():
    # row 0 predicts draft[0]; the target prefers 2 (logit ln 3) over the draft's 1 (logit 0): p = 3/4, 1/4
    logits = block([{2: math.log(3), 1: 0.0}, {4: 5.0}, {5: 5.0}, {0: 5.0}])
    hidden = torch.arange(4 * 3, dtype=torch.float32).reshape(4, 3)
    draft = [1, 4, 0]  # mismatch at 0; the target agrees at 1; disagrees at 2 (argmax 0? row 2 argmax is 5)
    ef = edge_features(logits, hidden, draft, [0])
    col = dict(zip(SCALARS, ef.scalars[0].tolist()))
    assert col["nll_draft"] == pytest.approx(math.log(4), abs=1e-4)
    assert col["nll_target"] == pytest.approx(-math.log(0.75), abs=1e-4)
    assert col["nll_margin"] == pytest.approx(math.log(3), abs=1e-4)
    assert col["top1"] == pytest.approx(0.75, abs=1e-4)
    assert col["entropy"] == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)), abs=1e-3)
    assert col["log_rank"] == pytest.approx(math.log(2))  # one token is more likely than the draft's
    assert col["lookahead"] == 1 and col["remaining"] == 2 and col["lookahead_frac"] == 0.5
    assert torch.equal(ef.h_after[0], hidden[1])  # the row that read the draft token
    assert torch.equal(ef.column("lookahead"), torch.tensor([1.0]))


def test_no_mismatch_gives_empty_features():
    ef = edge_features(torch.zeros(3, 5), torch.zeros(3, 7), [1, 2], [])
    assert len(ef) == 0 and ef.h_after.shape == (0, 7)
    assert len(EdgeFeatures.empty()) == 0
