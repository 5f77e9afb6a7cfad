"""Batch selection: deadlines by hand, FCFS order and memory stop, SLO-aware EDF for critical requests, utility fill,
and the memory / deadline stopping rules."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wisv.serving.scheduler import (
    Request,
    arrival_reserve_s,
    deadline_s,
    latest_start_s,
    select_fcfs,
    select_slo,
    slo_order,
)


def R(rid, arrival=0.0, deadline=10.0, g=4.0, v=1.0, mem=1, cached=0, new=1):
    return Request(rid, arrival, deadline, g, v, mem, cached, new)


def per_request(cost_s):
    """T_hat(B) = cost_s per request in the batch."""
    return lambda cached, new, block: cost_s * len(new)


def test_deadline_hand_value():
    # 8 drafted tokens at 4 tok/s leave 2 s; minus 0.3 s drafting and 0.2 s network
    assert deadline_s(10.0, 4.0, 8, 0.3, 0.2) == pytest.approx(11.5)
    assert deadline_s(0.0, 2.0, 4, 0.0, 0.0, alpha=0.5) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        deadline_s(0, 0, 4, 0, 0)
    assert latest_start_s(R("a", deadline=5, v=1), delta_s=0.5) == 3.5


def test_fcfs_takes_arrival_order_until_memory_or_max_batch():
    reqs = [R("c", arrival=3), R("a", arrival=1, mem=5), R("b", arrival=2, mem=5)]
    assert [r.rid for r in select_fcfs(reqs, mem_budget_bytes=20, max_batch=8)] == ["a", "b", "c"]
    assert [r.rid for r in select_fcfs(reqs, mem_budget_bytes=10, max_batch=8)] == ["a", "b"]
    assert [r.rid for r in select_fcfs(reqs, mem_budget_bytes=20, max_batch=1)] == ["a"]


def test_slo_order_puts_critical_first_by_deadline_then_utility():
    reqs = [R("hi_util", deadline=50, g=8, v=1), R("lo_util", deadline=40, g=1, v=1),
            R("crit_late", deadline=3.0, v=1), R("crit_early", deadline=2.5, v=1)]
    # at t=2: LST = d - v: crit_early 1.5, crit_late 2.0 -> both critical
    assert [r.rid for r in slo_order(reqs, now_s=2.0, delta_s=0.0)] == ["crit_early", "crit_late", "hi_util", "lo_util"]
    # at t=0 nothing is critical: utility g/v orders all (ties by arrival, then id)
    assert [r.rid for r in slo_order(reqs, now_s=0.0, delta_s=0.0)] == ["hi_util", "crit_early", "crit_late", "lo_util"]


def test_lost_last_puts_hopeless_requests_after_the_rest():
    reqs = [R("util", deadline=50, g=8, v=1), R("crit", deadline=3.5, g=2, v=0.5), R("lost_a", deadline=2.5, v=1),
            R("lost_b", deadline=1.0, v=1)]
    # at t=2: lost_a (2.5 < 2 + 1) and lost_b are lost; crit (LST 3.0 > 2) is not critical yet
    assert [r.rid for r in slo_order(reqs, 2.0, 0.0)] == ["lost_b", "lost_a", "util", "crit"]  # the paper's EDF
    assert [r.rid for r in slo_order(reqs, 2.0, 0.0, lost_last=True)] == ["util", "crit", "lost_b", "lost_a"]
    # at t=2.8 with delta 0.3, crit is critical (LST 2.7) and can still make it (3.5 >= 2.8 + 0.5)
    assert [r.rid for r in slo_order(reqs, 2.8, 0.3, lost_last=True)] == ["crit", "util", "lost_b", "lost_a"]
    # the lost ones ride along while the batch keeps every feasible deadline (0.2 s each: 2.8 + 0.6 <= 3.5,
    # 2.8 + 0.8 > 3.5); with nothing else waiting they are served together, by deadline
    assert [r.rid for r in select_slo(reqs, 2.8, 100, per_request(0.2), lost_last=True)] == ["util", "crit", "lost_b"]
    assert [r.rid for r in select_slo(reqs[2:], 2.6, 100, per_request(5.0), lost_last=True)] == ["lost_b", "lost_a"]


def test_slo_stops_at_the_first_deadline_violation():
    reqs = [R("a", deadline=1.0, g=8), R("b", deadline=1.0, g=6), R("c", deadline=10.0, g=1)]
    # 0.4 s per request: {a} 0.4 <= 1, {a, b} 0.8 <= 1, {a, b, c} 1.2 > min deadline 1.0 -> stop
    assert [r.rid for r in select_slo(reqs, 0.0, 100, per_request(0.4))] == ["a", "b"]
    assert [r.rid for r in select_slo(reqs, 0.0, 100, per_request(0.1))] == ["a", "b", "c"]
    # the guard time is slack the batch must keep: {a, b} 0.8 + 0.3 > 1.0 -> a alone
    assert [r.rid for r in select_slo(reqs, 0.0, 100, per_request(0.4), delta_s=0.3)] == ["a"]
    # ... unless the slack is set apart from LST's guard (the paper's test has none)
    assert [r.rid for r in select_slo(reqs, 0.0, 100, per_request(0.4), delta_s=0.3, slack_s=0.0)] == ["a", "b"]


def test_slo_stops_at_memory_and_serves_a_late_request_alone():
    reqs = [R("a", g=8, mem=6), R("b", g=6, mem=6), R("c", g=1, mem=1)]
    assert [r.rid for r in select_slo(reqs, 0.0, 10, per_request(0.1))] == ["a"]  # b breaks memory: stop there
    late = [R("x", deadline=0.5, g=1)]
    assert [r.rid for r in select_slo(late, 1.0, 10, per_request(1.0))] == ["x"]
    # a lost deadline does not stop the batch: y (d=0.5 < now) rides along with z (d=10)
    lost = [R("y", deadline=0.5, g=8), R("z", deadline=10.0, g=1)]
    assert [r.rid for r in select_slo(lost, 1.0, 10, per_request(0.1))] == ["y", "z"]
    assert select_slo([R("big", mem=11)], 0.0, 10, per_request(0.1)) == []


def test_slo_stops_where_the_batch_would_outlast_the_arrival_reserve():
    reqs = [R("a", deadline=10.0, g=8), R("b", deadline=10.0, g=6), R("c", deadline=10.0, g=1)]
    # no deadline binds here; a 0.9 s cap stops at {a, b} (0.8 s), and one request always goes
    assert [r.rid for r in select_slo(reqs, 0.0, 100, per_request(0.4))] == ["a", "b", "c"]
    assert [r.rid for r in select_slo(reqs, 0.0, 100, per_request(0.4), max_batch_s=0.9)] == ["a", "b"]
    assert [r.rid for r in select_slo(reqs, 0.0, 100, per_request(0.4), max_batch_s=0.1)] == ["a"]


def test_horizon_makes_requests_critical_whose_lst_falls_within_the_next_batch():
    reqs = [R("hi_util", deadline=50, g=8, v=1), R("soon", deadline=3.5, g=1, v=1), R("later", deadline=4.5, g=1, v=1)]
    # at t=2 neither is critical (LST 2.5, 3.5); a 0.6 s look-ahead takes "soon" (LST 2.5 <= 2.6) first
    assert [r.rid for r in slo_order(reqs, 2.0, 0.0)] == ["hi_util", "later", "soon"]  # utility ties: by id
    assert [r.rid for r in slo_order(reqs, 2.0, 0.0, horizon_s=0.6)] == ["soon", "hi_util", "later"]
    assert [r.rid for r in slo_order(reqs, 2.0, 0.0, horizon_s=1.5)] == ["soon", "later", "hi_util"]
    # batches capped at one request (1 s): the look-ahead serves "soon" in time, the utility order loses it
    assert [r.rid for r in select_slo(reqs, 2.0, 100, per_request(1.0), max_batch_s=1.0, horizon_s=1.0)] == ["soon"]
    assert [r.rid for r in select_slo(reqs, 2.0, 100, per_request(1.0), max_batch_s=1.0)] == ["hi_util"]


def test_arrival_reserve_leaves_a_tight_arrival_its_own_verification():
    # 60 ms budget, 10 ms guard: batches up to 25 ms, as long as the one a tight arrival then needs
    assert arrival_reserve_s(0.060, 0.008, 0.010) == pytest.approx(0.025)
    assert arrival_reserve_s(0.020, 0.008, 0.010) == pytest.approx(0.008)  # never below one request
    assert arrival_reserve_s(float("inf"), 0.008, 0.010) == float("inf")  # no deadlines: no cap


requests = st.lists(st.builds(
    Request, rid=st.uuids().map(str), arrival_s=st.floats(0, 1), deadline_s=st.floats(0, 3),
    g_tokens=st.floats(0.5, 16), v_s=st.floats(0.001, 0.5), mem_bytes=st.integers(0, 50),
    cached=st.integers(0, 600), new=st.integers(1, 32)), max_size=12, unique_by=lambda r: r.rid)


@settings(max_examples=200, deadline=None)
@given(requests, st.floats(0, 2), st.integers(0, 200), st.floats(0.001, 0.2), st.integers(1, 8), st.booleans(),
       st.floats(0.001, 1.0) | st.just(float("inf")), st.floats(0, 1.0))
def test_slo_batches_always_respect_memory_and_deadlines(pending, now, mem, per_req, max_batch, lost_last, cap,
                                                         horizon):
    batch = select_slo(pending, now, mem, per_request(per_req), max_batch=max_batch, lost_last=lost_last,
                       max_batch_s=cap, horizon_s=horizon)
    assert len(batch) <= max_batch and len({r.rid for r in batch}) == len(batch)
    assert len(batch) <= 1 or per_req * len(batch) <= cap  # only a single request may outlast the reserve
    assert sum(r.mem_bytes for r in batch) <= mem
    feasible = [r.deadline_s for r in batch if r.deadline_s >= now + r.v_s]
    if len(batch) > 1 and feasible:  # a larger batch meets the deadline of every member that could still make it
        assert now + per_req * len(batch) <= min(feasible) + 1e-12
    assert [r.rid for r in batch] == [r.rid for r in slo_order(pending, now, 0.0, lost_last, horizon)][: len(batch)]
    fcfs = select_fcfs(pending, mem, max_batch)
    assert sum(r.mem_bytes for r in fcfs) <= mem and len(fcfs) <= max_batch
