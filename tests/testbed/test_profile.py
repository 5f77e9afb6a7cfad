"""testbed.profile end to end on the tiny pair: samples of every kind, a loadable profile with held-out metrics."""
import ast

import numpy as np
import pandas as pd
import pytest

from testbed.profile import ProfileConfig, repeats_needed, run, sample_batch, summarize_times
from wisv.serving.estimator import EstimatorProfile


def test_sample_batch_kinds():
    rng, cfg = np.random.default_rng(0), ProfileConfig(max_batch=3, max_prefix=40, max_draft_len=4)
    assert all(c == 0 for c, _ in sample_batch(rng, cfg, "cold"))
    assert all(16 <= c <= 40 and 1 <= k <= 4 for c, k in sample_batch(rng, cfg, "warm"))


def test_profile_run_writes_a_profile_the_scheduler_can_load(pair_dirs, tmp_path):
    out = tmp_path / "prof.json"
    run(ProfileConfig(target=str(pair_dirs.target), batches=12, max_batch=3, max_prefix=48, max_prompt=24,
                      max_draft_len=4, n_boot=10, test_frac=0.3, repeats=3, out=str(out)))
    prof = EstimatorProfile.load(out)
    assert set(prof.coef) == {"a", "b_compute", "b_read", "d_seq", "c"} and prof.train["r2"] <= 1
    samples = pd.read_csv(tmp_path / "prof_samples.csv")
    assert len(samples) == 12 and set(samples["kind"]) == {"cold", "warm", "mixed"}
    assert prof.meta["batches_train"] + prof.meta["batches_test"] == 12
    times = samples["times_s"].map(ast.literal_eval)
    assert all(len(t) == 3 for t in times)
    assert np.allclose(samples["seconds"], [min(t) for t in times], rtol=0, atol=1e-7)
    assert [r["repeats"] for r in prof.meta["by_repeats"]] == [1, 2, 3]
    assert "mape_pct" in prof.meta["test_vs_median"]


def test_summarize_times():
    assert summarize_times([3.0, 1.0, 2.0], "min") == 1.0
    assert summarize_times([3.0, 1.0, 2.0], "median") == 2.0
    with pytest.raises(ValueError):
        summarize_times([1.0], "mean")


def test_more_repeats_recover_the_model_under_additive_interference():
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(1, 50, 200), rng.uniform(0, 500, 200), rng.uniform(0, 900, 200), np.ones(200)])
    clean = x @ np.array([1e-4, 1e-7, 5e-6, 3e-3])
    slow = rng.random((200, 6)) < 0.5  # half the repeats hit a slow spell: +20..60%
    times = clean[:, None] * (1 + slow * rng.uniform(0.2, 0.6, (200, 6)))
    test = np.arange(200) % 4 == 0
    rows = repeats_needed(x, times, test, "min")
    assert rows[0]["mape_pct"] > 5 and rows[-1]["mape_pct"] < 2  # one repeat is noisy; the min of six is clean
