"""Paired accuracy (wisv/records/paired.py): lost/gained counts, the bootstrap interval, McNemar's p."""
import numpy as np
import pandas as pd
import pytest

from wisv.records.paired import bootstrap_delta_ci, paired_accuracy, paired_frame, paired_time_change


def test_lost_and_gained_are_the_discordant_prompts():
    base = np.array([1, 1, 1, 0, 0, 1, 1, 0], bool)
    new = np.array([1, 0, 0, 1, 0, 1, 1, 0], bool)
    r = paired_accuracy(base, new)
    assert (r.n, r.lost, r.gained) == (8, 2, 1)
    assert r.delta == pytest.approx(-1 / 8)
    assert r.ci_low <= r.delta <= r.ci_high
    assert r.mcnemar_p == pytest.approx(1.0)  # 2 of 3 discordant: binomial two-sided p = 1


def test_identical_methods_have_a_zero_width_interval_and_p_one():
    x = np.array([1, 0, 1, 1], bool)
    r = paired_accuracy(x, x)
    assert (r.lost, r.gained, r.delta, r.ci_low, r.ci_high, r.mcnemar_p) == (0, 0, 0.0, 0.0, 0.0, 1.0)


def test_a_clear_loss_has_an_interval_below_zero_and_a_small_p():
    base = np.ones(40, bool)
    new = np.ones(40, bool)
    new[:12] = False
    r = paired_accuracy(base, new)
    assert r.ci_high < 0 and r.mcnemar_p < 0.001


def test_the_interval_is_seeded():
    rng = np.random.default_rng(3)
    a, b = rng.random(30) < 0.6, rng.random(30) < 0.5
    assert bootstrap_delta_ci(a, b, seed=1) == bootstrap_delta_ci(a, b, seed=1)
    assert bootstrap_delta_ci(np.array([]), np.array([]))[0] != bootstrap_delta_ci(np.array([]), np.array([]))[0]


def test_frames_are_aligned_by_prompt_and_unequal_lengths_refused():
    base = pd.DataFrame({"prompt_id": ["a", "b", "c"], "correct": [True, True, None]})
    new = pd.DataFrame({"prompt_id": ["c", "b", "a", "d"], "correct": [True, False, True, True]})
    b, n = paired_frame(base, new)
    assert list(b) == [True, True] and list(n) == [True, False]
    with pytest.raises(ValueError, match="same prompts"):
        paired_accuracy(np.ones(3), np.ones(4))


def test_run_vs_run_pairs_two_runs_of_one_protocol_by_prompt():
    """Two drafters on the same prompts: outputs compared, AAL from the histograms, the latency change of the totals
    with a paired interval that holds it, faster and slower prompts; no shared prompt is an error."""
    from wisv.records.paired import run_vs_run
    base = pd.DataFrame({"prompt_id": ["a", "b", "c"], "tokens": [[1, 2], [3], [4]], "rounds": [4, 2, 4],
                         "t_e2e_s": [4.0, 2.0, 2.0], "acceptance_histogram": [[2, 2], [2], [4]]})
    new = pd.DataFrame({"prompt_id": ["c", "b", "a", "z"], "tokens": [[4], [3], [1, 2], [9]], "rounds": [2, 2, 1, 9],
                        "t_e2e_s": [1.0, 2.5, 2.5, 9.0], "acceptance_histogram": [[0, 2], [1, 1], [0, 0, 1], [9]]})
    got = run_vs_run(base, new, n_boot=2000)
    assert got["prompts"] == 3 and got["identical_outputs"] == 3  # z is only in the new run
    assert got["aal_base"] == pytest.approx(2 / 10) and got["aal_new"] == pytest.approx((2 + 1 + 2) / 5)
    assert got["rounds_change_pct"] == pytest.approx(100 * (5 / 10 - 1))
    assert got["latency_change_pct"] == pytest.approx(100 * (6 / 8 - 1))
    assert got["latency_ci_low_pct"] <= got["latency_change_pct"] <= got["latency_ci_high_pct"]
    assert (got["faster"], got["slower"]) == (2, 1)
    assert run_vs_run(base, new, n_boot=2000) == got  # seeded
    with pytest.raises(ValueError, match="share no prompt"):
        run_vs_run(base, new[new.prompt_id == "z"])


def test_paired_time_change_gives_the_total_change_its_interval_and_the_counts():
    base, new = np.array([10.0, 20.0, 30.0, 40.0]), np.array([9.0, 18.0, 31.0, 36.0])
    got = paired_time_change(base, new, n_boot=2000)
    assert got["change_pct"] == pytest.approx(-6.0) and (got["faster"], got["slower"]) == (3, 1)
    assert got["ci_low_pct"] <= got["change_pct"] <= got["ci_high_pct"] < 5.0
    assert paired_time_change(base, new, n_boot=2000) == got  # seeded
    with pytest.raises(ValueError, match="same prompts"):
        paired_time_change(base, new[:3])
