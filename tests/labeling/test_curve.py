"""The learning curve's AUC by hand, its sizes, and a curve that rises on a learnable synthetic label."""
import numpy as np
import pytest
import torch

from labeling.curve import CurveConfig, curve_sizes, learning_curve, roc_auc


@pytest.mark.parametrize("scores, y, want", [
    ([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], 1.0),
    ([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1], 0.0),
    ([0.5, 0.5, 0.5, 0.5], [0, 1, 0, 1], 0.5),  # ties count a half
    ([0.1, 0.6, 0.4, 0.9], [0, 0, 1, 1], 0.75),  # 3 of the 4 (positive, negative) pairs ordered
])
def test_roc_auc_by_hand(scores, y, want):
    assert roc_auc(np.array(scores), np.array(y)) == pytest.approx(want)


def test_auc_nan_with_one_class_and_sizes_capped():
    assert np.isnan(roc_auc(np.array([0.1, 0.2]), np.array([1, 1])))
    assert curve_sizes((100, 250, 500), 300) == [100, 250, 300]


def test_curve_on_a_learnable_label():
    rng = np.random.default_rng(0)
    n, d = 1200, 8
    z = torch.from_numpy(rng.normal(size=(n, d)).astype(np.float32))
    y = (z[:, 0].numpy() + 0.3 * rng.normal(size=n) > 0.5).astype(int)  # harmful iff one feature is high
    episodes = np.repeat(np.arange(n // 10), 10)
    df = learning_curve(z, y, episodes, CurveConfig(sizes=(50, 800), epochs=15, test_frac=0.25))
    assert list(df["n_train"]) == [50, 800, 900] and (df["n_test"] == 300).all()
    assert df["auc"].iloc[-1] > 0.9


def test_feature_sets_build_the_inputs_they_name():
    """hidden = [h_d ; h_t]; edge = the two target NLLs and their difference; both = concatenated; edge needs the
    label stage's NLL columns."""
    import pandas as pd

    from labeling.curve import feature_inputs
    traces = {"h_d": np.arange(12, dtype=np.float16).reshape(3, 4),
              "h_t": -np.arange(12, dtype=np.float16).reshape(3, 4)}
    labels = pd.DataFrame({"row": [2, 0], "nll_draft": [3.0, 1.0], "nll_target": [0.5, 0.25]})
    hidden = feature_inputs(labels, traces, "hidden")
    assert hidden.shape == (2, 8) and hidden[0, 0] == 8 and hidden[0, 4] == -8
    edge = feature_inputs(labels, traces, "edge")
    assert edge.tolist() == [[3.0, 0.5, 2.5], [1.0, 0.25, 0.75]]
    assert feature_inputs(labels, traces, "hidden+edge").shape == (2, 11)
    assert feature_inputs(labels.drop(columns=["nll_draft"]), traces, "edge") is None
