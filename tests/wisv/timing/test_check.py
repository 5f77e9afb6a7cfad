"""A prediction's check (wisv/timing/check.py) and the corrections auto's choice applies (wisv/timing/handover.py)."""
import pytest

from wisv.timing.check import CHECK_BOUNDS, Ratio, check_round
from wisv.timing.handover import choose_round

LINK = lambda n: 0.005 + n * 1e-5  # noqa: E731  a chunk's link time, s


def test_no_round_no_correction():
    assert Ratio().factor == 1.0


def test_the_ratio_is_measured_over_predicted_seconds_decayed_by_hand():
    r = check_round(Ratio(), 0.004, measured_s=0.027, tokens=9)  # predicted 36 ms, measured 27 ms
    assert r.factor == pytest.approx(0.027 / 0.036)
    r = check_round(r, 0.004, measured_s=0.045, tokens=9, decay=0.5)
    assert r.factor == pytest.approx((0.5 * 0.027 + 0.045) / (0.5 * 0.036 + 0.036))


def test_a_round_with_nothing_to_check_leaves_the_ratio():
    r = check_round(Ratio(), 0.004, 0.03, 8)
    assert check_round(r, 0.004, 0.03, 0) == r and check_round(r, 0.004, 0.0, 8) == r
    assert check_round(r, 0.0, 0.03, 8) == r
    with pytest.raises(ValueError):
        check_round(r, 0.004, 0.03, 8, decay=1.0)


def test_the_correction_is_bounded():
    lo, hi = CHECK_BOUNDS
    assert check_round(Ratio(), 0.001, 1.0, 1).factor == hi
    assert check_round(Ratio(), 1.0, 0.001, 1).factor == lo


def test_a_check_reverses_a_choice_its_raw_costs_would_make():
    """Speculation predicted at 4.6 ms a token against the edge at 4.2: the edge takes the round; its rounds measured
    1.26x speculation's prediction too dear and the edge's 0.85x too cheap: corrected, speculation keeps it."""
    raw = choose_round(0.0046, 0.0040, LINK, budget_tokens=64)
    assert raw.edge_alone
    fixed = choose_round(0.0046, 0.0040, LINK, budget_tokens=64, spec_factor=1 / 1.26, edge_factor=1 / 0.85)
    assert not fixed.edge_alone
    assert fixed.spec_s_per_token == pytest.approx(0.0046 / 1.26)  # the choice holds the corrected costs
    assert fixed.edge_s_per_token / fixed.edge_factor == pytest.approx(0.0040 + LINK(16) / 16)
    with pytest.raises(ValueError):
        choose_round(0.0046, 0.0040, LINK, budget_tokens=64, edge_factor=0.0)


def test_a_near_tie_stays_with_the_side_running():
    """Speculation at 4.0 ms a token, the edge at 3.9 (2.5% cheaper, within the 5% margin): speculation keeps the
    round while it runs, and the edge keeps it while the edge runs; a clear win changes sides either way."""
    edge = lambda n: 0.0  # noqa: E731  no link: the edge's cost is its decode time
    assert not choose_round(0.0040, 0.0039, edge, budget_tokens=64).edge_alone
    assert choose_round(0.0040, 0.0039, edge, budget_tokens=64, edge_running=True).edge_alone
    assert choose_round(0.0040, 0.0041, edge, budget_tokens=64, edge_running=True).edge_alone  # 2.5% dearer: stays
    assert not choose_round(0.0040, 0.0043, edge, budget_tokens=64, edge_running=True).edge_alone  # 7%: speculate
    assert choose_round(0.0040, 0.0037, edge, budget_tokens=64).edge_alone  # 7.5% cheaper: the edge takes it
