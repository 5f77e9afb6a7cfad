"""testbed.profile end to end on the tiny pair: samples of every kind, a loadable profile with held-out metrics."""
import numpy as np
import pandas as pd

from testbed.profile import ProfileConfig, run, sample_batch
from wisv.estimator import EstimatorProfile


def test_sample_batch_kinds():
    rng, cfg = np.random.default_rng(0), ProfileConfig(max_batch=3, max_prefix=40, max_draft_len=4)
    assert all(c == 0 for c, _ in sample_batch(rng, cfg, "cold"))
    assert all(16 <= c <= 40 and 1 <= k <= 4 for c, k in sample_batch(rng, cfg, "warm"))


def test_profile_run_writes_a_profile_the_scheduler_can_load(pair_dirs, tmp_path):
    out = tmp_path / "prof.json"
    run(ProfileConfig(target=str(pair_dirs.target), batches=12, max_batch=3, max_prefix=48, max_prompt=24,
                      max_draft_len=4, n_boot=10, test_frac=0.3, out=str(out)))
    prof = EstimatorProfile.load(out)
    assert set(prof.coef) == {"a", "b_compute", "b_read", "c"} and prof.train["r2"] <= 1
    samples = pd.read_csv(tmp_path / "prof_samples.csv")
    assert len(samples) == 12 and set(samples["kind"]) == {"cold", "warm", "mixed"}
    assert prof.meta["batches_train"] + prof.meta["batches_test"] == 12
