"""tau with confidence (labeling/risk.py): the Clopper-Pearson bound and the largest tau within budget."""
import numpy as np
import pytest
from scipy.stats import binom

from labeling.risk import RiskConfig, flip_upper_bound, ltt_sweep, ltt_tau


@pytest.mark.parametrize("k,n,delta", [(0, 10, 0.1), (0, 230, 0.1), (3, 100, 0.1), (5, 20, 0.05)])
def test_the_bound_is_the_rate_at_which_seeing_k_or_fewer_has_probability_delta(k, n, delta):
    ub = flip_upper_bound(k, n, delta)
    assert binom.cdf(k, n, ub) == pytest.approx(delta, abs=1e-9)
    assert ub > k / n


def test_zero_flips_of_n_bound_is_one_minus_delta_to_the_1_over_n():
    assert flip_upper_bound(0, 50, 0.1) == pytest.approx(1 - 0.1 ** (1 / 50))
    assert flip_upper_bound(0, 0, 0.1) == 1.0 and flip_upper_bound(4, 4, 0.1) == 1.0


def test_tau_is_the_largest_whose_bound_is_within_budget_not_the_point_estimate():
    # 400 checkable mismatches; p ranks them; flips sit among the higher p only
    p = np.linspace(0, 1, 400, endpoint=False)
    flips = np.zeros(400, bool)
    flips[[300, 320, 340, 360, 380]] = True
    taus = [0.25, 0.5, 0.75, 0.9, 1.0]
    sw = ltt_sweep(p, flips, np.ones(400, bool), taus, RiskConfig(flip_budget=0.02, delta=0.1))
    # 0 of 100 at 0.25: bound 0.0228 fails (too few seen); 3 of 360 at 0.9: 0.0185 passes; 5 of 400: 0.0231 fails
    assert list(sw["passes"]) == [False, True, True, True, False]
    assert ltt_tau(sw) == 0.9
    point = sw[sw["flip_rate"] <= 0.02]["tau"].max()
    assert point == 1.0  # the point estimate would have taken every mismatch


def test_uncheckable_mismatches_do_not_count_and_bonferroni_is_stricter():
    p = np.linspace(0, 1, 300, endpoint=False)
    flips = np.zeros(300, bool)
    checkable = np.arange(300) % 2 == 0
    flips[1::2] = True  # flips on uncheckable rows are not read
    cfg = RiskConfig(flip_budget=0.018, delta=0.1)
    assert ltt_tau(ltt_sweep(p, flips, checkable, [0.5, 1.0], cfg)) == 1.0  # 0 of 150 checkable: 0.0152
    strict = RiskConfig(flip_budget=0.018, delta=0.1, bonferroni=True)
    assert ltt_tau(ltt_sweep(p, flips, checkable, [0.5, 1.0], strict)) == 0.0  # at delta 0.05: 0.0198


def test_no_tau_within_budget_is_greedy():
    sw = ltt_sweep(np.zeros(10), np.ones(10, bool), np.ones(10, bool), [0.5], RiskConfig())
    assert ltt_tau(sw) == 0.0
