"""The edge's free features at a mismatch, from hand-built logits (wisv/head/features.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from wisv.head.features import (
    BASE_SCALARS,
    SCALARS,
    SIBLING_SCALARS,
    EdgeFeatures,
    SiblingRows,
    edge_features,
    lookahead_runs,
    sibling_columns,
    with_out_pos,
)


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


def test_sibling_columns_tell_a_synonym_from_a_changed_continuation():
    """Hand-built rows: after the draft token and after the target's token the target predicts the same next token
    (a synonym: agreement 1, small JS, cosine 1) or another one (a changed fact: agreement 0, large JS)."""
    after_draft = block([{3: 5.0, 4: 1.0}, {3: 5.0, 4: 1.0}])  # [2, V]: both predict token 3 next
    sib = SiblingRows(block([{3: 4.0, 4: 1.5}, {4: 5.0, 3: 1.0}]),  # same argmax 3 | argmax 4: another continuation
                      torch.tensor([[1.0, 2.0, 0.0], [-1.0, 0.0, 2.0]]))
    h = torch.tensor([[2.0, 4.0, 0.0], [1.0, 0.0, 0.0]])  # parallel to the first sibling's state, not the second's
    cols = sibling_columns(after_draft, h, sib)
    agree, js, cos = cols.unbind(1)
    assert agree.tolist() == [1.0, 0.0]
    assert 0 <= js[0] < 0.05 < js[1] <= math.log(2)
    assert cos[0] == pytest.approx(1.0) and cos[1] == pytest.approx(-1 / math.sqrt(5))
    same = sibling_columns(after_draft, h, SiblingRows(after_draft, h))  # the same branch twice
    assert same[:, 1].tolist() == pytest.approx([0, 0], abs=1e-7)


def test_edge_features_sibling_columns_nan_without_the_pass_and_filled_with_it():
    logits = block([{1: 3.0, 2: 2.0}, {3: 3.0}, {4: 3.0}])  # [3, V]; the draft [2, 3] mismatches at 0
    hidden = torch.arange(21, dtype=torch.float32).reshape(3, 7)
    off = edge_features(logits, hidden, [2, 3], [0])
    n, sib = len(BASE_SCALARS), slice(len(BASE_SCALARS), len(BASE_SCALARS) + len(SIBLING_SCALARS))
    assert off.scalars.shape == (1, len(SCALARS)) and off.scalars[:, sib].isnan().all()
    on = edge_features(logits, hidden, [2, 3], [0], SiblingRows(block([{3: 3.0}]), hidden[1:2] * 2))
    assert torch.equal(on.scalars[:, :n], off.scalars[:, :n])
    assert on.column("sib_agree").tolist() == [1.0] and on.column("sib_cos").item() == pytest.approx(1.0)


def test_out_pos_is_where_in_the_output_each_mismatch_falls():
    logits = block([{1: 3.0}, {3: 3.0}, {4: 3.0}, {5: 3.0}])  # [4, V]: the draft [2, 3, 0] mismatches at 0 and 2
    hidden = torch.zeros(4, 3)
    assert edge_features(logits, hidden, [2, 3, 0], [0, 2]).column("out_pos").tolist() == [0.0, 2.0]
    assert edge_features(logits, hidden, [2, 3, 0], [0, 2], out_offset=17).column("out_pos").tolist() == [17.0, 19.0]


def test_with_out_pos_widens_rows_recorded_before_the_column():
    old = np.arange(2 * len(BASE_SCALARS), dtype=np.float32).reshape(2, -1)  # no sibling, no out_pos columns
    wide = with_out_pos(old, np.array([4, 9]))
    assert wide.shape == (2, len(SCALARS))
    assert np.array_equal(wide[:, :len(BASE_SCALARS)], old) and np.isnan(wide[:, len(BASE_SCALARS):-1]).all()
    assert wide[:, SCALARS.index("out_pos")].tolist() == [4.0, 9.0]
    assert with_out_pos(wide, np.array([0, 0])) is wide  # a row that has the column keeps its own
