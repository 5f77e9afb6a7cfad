"""Verification-time estimator: features by hand, exact recovery of known coefficients, CIs, metrics, save/load."""
import json

import numpy as np
import pytest

from wisv.serving.estimator import EstimatorProfile, batch_features, bootstrap_ci, fit_metrics, fit_ols, fit_profile


def test_batch_features_hand_values():
    # two requests: (cached 10, new 3) and (cached 0, new 5)
    f = batch_features([10, 0], [3, 5])
    assert f.tolist() == [8, (10 + 3) * 3 + 5 * 5, 10, 2, 1]
    with pytest.raises(ValueError):
        batch_features([1], [1, 2])
    with pytest.raises(ValueError):
        batch_features([0], [0])


def _synthetic(n=120, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    x = np.stack([batch_features(list(rng.integers(0, 500, b)), list(rng.integers(1, 40, b)))
                  for b in rng.integers(1, 6, n)])
    true = np.array([2e-5, 3e-8, 1e-6, 2e-3, 4e-3])
    return x, x @ true + noise * rng.standard_normal(n), true


def test_ols_recovers_exact_coefficients():
    x, y, true = _synthetic()
    assert fit_ols(x, y) == pytest.approx(true, rel=1e-6)


def test_bootstrap_ci_brackets_the_truth_and_metrics():
    x, y, true = _synthetic(noise=2e-4, seed=1)
    lo, hi = bootstrap_ci(x, y, n_boot=100, seed=0)
    assert np.all(lo <= hi)
    assert lo[4] < true[4] < hi[4] and lo[3] < true[3] < hi[3]
    m = fit_metrics(y, x @ fit_ols(x, y))
    assert m["r2"] > 0.9 and m["mae_s"] < 5e-4 and m["mape_pct"] > 0
    assert fit_metrics(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == {"r2": 1.0, "mae_s": 0.0, "mape_pct": 0.0}


def test_profile_fit_predict_save_load(tmp_path):
    x, y, true = _synthetic()
    test = np.arange(len(y)) % 5 == 0
    prof = fit_profile(x, y, test, n_boot=20)
    assert prof.test["r2"] == pytest.approx(1.0) and prof.predict_s([10, 0], [3, 5]) == pytest.approx(
        batch_features([10, 0], [3, 5]) @ true)
    back = EstimatorProfile.load(prof.save(tmp_path / "p.json"))
    assert back.coef == prof.coef
    (tmp_path / "bad.json").write_text("{}")
    old = {**prof.__dict__, "coef": {k: v for k, v in prof.coef.items() if k != "d_seq"}}
    (tmp_path / "old.json").write_text(json.dumps(old))  # saved before the per-sequence term: d_seq reads 0
    assert EstimatorProfile.load(tmp_path / "old.json").coef == {**old["coef"], "d_seq": 0.0}
    (tmp_path / "odd.json").write_text(json.dumps({**old, "coef": {**old["coef"], "e": 1.0}}))
    with pytest.raises(ValueError, match="expected"):
        EstimatorProfile.load(tmp_path / "odd.json")
    with pytest.raises(ValueError, match="testbed.profile"):
        EstimatorProfile.load(tmp_path / "bad.json")


def test_batch_features_count_what_the_padded_engine_computes():
    # one request is one pass: block changes nothing
    assert batch_features([10], [9], [9]).tolist() == batch_features([10], [9]).tolist()
    # warm (cached 10, K=2 -> block 3) + cold (prompt 4 + K=1: new 5, block 2): the cold tail of 3 is
    # prefilled alone, then both rows run padded to 3 new tokens over max(10, 3) = 10 cache entries
    f = batch_features([10, 0], [3, 5], [3, 2])
    assert f.tolist() == [3 + 2 * 3, 3 * 3 + 2 * 3 * (10 + 3), 0 + 2 * 10, 2, 1]
    # two warm rows of different K: the short one is padded to the long one's block
    assert batch_features([5, 7], [2, 4], [2, 4]).tolist() == [8, 2 * 4 * (7 + 4), 14, 2, 1]
    with pytest.raises(ValueError):
        batch_features([1, 1], [2, 2], [3, 1])  # block > new


def test_live_fit_starts_at_the_profile_and_learns_a_fixed_and_a_proportional_part():
    from wisv.serving.estimator import LiveFit, live_update
    fit = LiveFit()
    assert fit.predict(0.02) == pytest.approx(0.02)
    rng = np.random.default_rng(0)
    for raw in rng.uniform(0.003, 0.04, 200):  # the live edge pays 4 ms a batch more, and 10% more per unit
        fit = live_update(fit, raw, 0.004 + 1.1 * raw)
    assert fit.scale == pytest.approx(1.1, rel=0.05) and fit.offset_s == pytest.approx(0.004, abs=4e-4)
    assert fit.predict(0.003) == pytest.approx(0.0073, rel=0.05) and fit.predict(0.04) == pytest.approx(0.048, rel=0.05)


def test_live_fit_stays_determined_on_one_batch_size_and_within_bounds():
    from wisv.serving.estimator import LiveFit, live_update
    fit = LiveFit()
    for _ in range(100):  # every batch the same: the prior keeps the 2x2 system solvable
        fit = live_update(fit, 0.01, 0.02)
    assert fit.predict(0.01) == pytest.approx(0.02, rel=0.02)
    assert live_update(LiveFit(), 0.0, 0.02) == LiveFit()  # nothing to learn from
    wild = LiveFit()
    for raw in (0.005, 0.04) * 50:
        wild = live_update(wild, raw, 100 * raw)
    assert wild.scale == 4.0 and wild.predict(0.001) >= 0.25 * 0.001


def test_per_sequence_term_fits_what_the_h200_grid_showed():
    # time that grows with the batch whatever K (per-sequence host work): only d_seq can carry it
    rows = [([4096 // b] * b, [k + 1] * b) for b in (1, 4, 16, 32) for k in (1, 4, 16, 64)]  # same cache in all
    x = np.stack([batch_features(c, n, n) for c, n in rows])
    y = 0.028 + 0.002 * x[:, 3] + 1e-6 * x[:, 0]
    coef = fit_ols(x, y)
    assert coef[3] == pytest.approx(0.002, rel=1e-6) and fit_metrics(y, x @ coef)["r2"] == pytest.approx(1.0)
    without = fit_ols(np.delete(x, 3, axis=1), y)
    assert fit_metrics(y, np.delete(x, 3, axis=1) @ without)["r2"] < 0.99
