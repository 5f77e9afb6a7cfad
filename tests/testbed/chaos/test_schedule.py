"""The chaos schedule and trace are pure functions of the seed: replayable, every kind drawn, no overlap per target."""
from __future__ import annotations

from testbed.chaos.schedule import GAP_AFTER_S, KINDS, LINK_KINDS, Draw, draw_schedule, link_trace


def test_the_same_seed_replays_the_same_schedule_and_another_seed_does_not() -> None:
    d = Draw(duration_s=300.0, ues=16)
    assert draw_schedule(7, d) == draw_schedule(7, d)
    assert link_trace(7, draw_schedule(7, d), 320) == link_trace(7, draw_schedule(7, d), 320)
    assert draw_schedule(7, d) != draw_schedule(8, d)


def test_every_kind_comes_and_faults_on_one_target_do_not_overlap() -> None:
    d = Draw(duration_s=600.0, mean_gap_s=4.0, ues=16, max_outage_s=20.0)
    faults = draw_schedule(1, d)
    assert {f.kind for f in faults} == set(KINDS) and len(faults) > 100
    lanes: dict[str, float] = {}
    for f in faults:
        lane = "probe" if f.kind == "probe" else f.target
        assert f.t_s >= lanes.get(lane, 0.0) - 1e-6 and d.warmup_s <= f.t_s < d.duration_s  # rounded to ms
        lanes[lane] = f.t_s + f.duration_s + GAP_AFTER_S
        if f.kind == "outage":
            assert 1.0 <= f.duration_s <= 20.0


def test_the_trace_holds_each_link_fault_for_its_duration() -> None:
    faults = draw_schedule(3, Draw(duration_s=200.0))
    rows = link_trace(3, faults, 220)
    at = lambda t: next(r for r in reversed(rows) if r["t_s"] <= t)  # noqa: E731
    for f in (f for f in faults if f.kind in LINK_KINDS):
        mid = at(f.t_s + f.duration_s / 2)
        if f.kind == "outage":
            assert mid["outage"] == 1
        elif f.kind == "per_burst":
            assert mid["per"] == f.level
        else:
            assert mid["rate_up_mbps"] <= f.level
    assert [r["t_s"] for r in rows] == sorted(r["t_s"] for r in rows)
