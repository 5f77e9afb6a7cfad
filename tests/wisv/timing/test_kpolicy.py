"""The K rules in order, as one pure function: the cap, the edge's stop depth, the auto window, the pipeline depth."""
import pytest

from wisv.timing.kpolicy import KFacts, block_k, pipeline_depth


@pytest.mark.parametrize("facts, window, k", [
    (KFacts(budget_tokens=100, k_max=8), None, 8),  # the cap alone
    (KFacts(budget_tokens=5, k_max=8), None, 4),  # one token of the budget left for the edge's
    (KFacts(budget_tokens=1, k_max=8), None, 1),  # never below one
    (KFacts(budget_tokens=100, k_max=8, stop_depth=3), None, 3),  # the edge's stop depth
    (KFacts(budget_tokens=100, k_max=8, stop_depth=0), None, 8),  # none suggested: off
    (KFacts(budget_tokens=100, k_max=32, stop_depth=6), lambda k: min(k, 5), 5),  # the auto window, <= the K so far
    (KFacts(budget_tokens=100, k_max=8, verify_s=0.010, tau_d_s=0.002, rtt_s=0.004), None, 3),  # (10 - 4) / 2 ms
    (KFacts(budget_tokens=100, k_max=8, verify_s=1.0, tau_d_s=0.002), lambda k: 6, 6),  # pipeline <= the window's K
])
def test_the_rules_apply_in_order(facts, window, k):
    assert block_k(facts, window) == k


def test_the_window_sees_the_k_the_first_rules_left():
    seen = []
    block_k(KFacts(budget_tokens=4, k_max=8, stop_depth=5), lambda k: seen.append(k) or k)
    assert seen == [3]


def test_pipeline_depth_is_clamped_and_checked():
    assert pipeline_depth(0.010, 0.004, 0.002, 1, 64) == 3 and pipeline_depth(0.0, 0.05, 0.002, 2, 8) == 2
    with pytest.raises(ValueError):
        pipeline_depth(0.01, 0.0, 0.0)
