"""The chaos checker's invariants on hand-built journals and records: each kind of violation is caught, and a
clean history (an edge restart, a resume, a UE restarted from round 0) passes."""
from __future__ import annotations

from testbed.chaos.check import (
    Wave,
    journal_commits,
    journal_violations,
    prompt_violations,
    recoveries,
    rss_growth,
    sessions_left,
)


def ev(t: float, kind: str, sid: str = "ue0w0-0", pid: int = 1, **kw) -> dict:
    return {"ev": kind, "t": t, "sid": sid, "pid": pid, "token": kw.pop("token", "a" * 32), **kw}


CLEAN = [ev(1, "open", round=0), ev(2, "commit", round=0, tokens=[5, 6]),
         ev(3, "commit", round=1, tokens=[7]),  # the edge is killed before its VERDICT reached the UE
         ev(5, "open", pid=2, round=1, token="b" * 32), ev(6, "commit", pid=2, round=1, tokens=[7], token="b" * 32),
         ev(7, "commit", pid=2, round=2, tokens=[8, 9], token="b" * 32), ev(8, "drop", pid=2, token="b" * 32)]


def wave(tokens: list[int], rounds: list[tuple[int, int]], protocol: str = "greedy") -> Wave:
    return Wave(0, "ue0w0", protocol, ["p0"], [{"prompt_id": "p0", "tokens": tokens}],
                [{"prompt_id": "p0", "round": r, "committed": c} for r, c in rounds])


def test_a_clean_history_across_an_edge_restart_and_a_resume_passes() -> None:
    assert journal_commits(CLEAN) == {"ue0w0-0": [5, 6, 7, 8, 9]}
    w = wave([5, 6, 7, 8, 9], [(0, 2), (1, 1), (2, 2)])
    assert prompt_violations(w, {"p0": [5, 6, 7, 8, 9]}) == []
    assert journal_violations([w], CLEAN) == [] and sessions_left(CLEAN) == []


def test_a_ue_restarted_from_round_0_starts_its_sessions_commits_over() -> None:
    again = CLEAN + [ev(9, "open", pid=2, round=0, token="c" * 32), ev(10, "commit", pid=2, round=0, tokens=[1],
                                                                       token="c" * 32)]
    assert journal_commits(again) == {"ue0w0-0": [1]}
    assert sessions_left(again) == ["left: session ue0w0-0 still open on the edge at the end"]


def test_each_violation_is_named() -> None:
    refs = {"p0": [5, 6, 7, 8, 9]}
    assert prompt_violations(wave([5, 6, 7, 8, 9], [(0, 2), (1, 1), (1, 1), (2, 2)]), refs)[0].startswith("duplicated")
    assert prompt_violations(wave([5, 6, 7, 8, 9], [(0, 2), (2, 2)]), refs)[0].startswith("lost")
    assert prompt_violations(wave([5, 6, 7, 8, 0], [(0, 2), (1, 1), (2, 2)]), refs)[0].startswith("diverging")
    assert prompt_violations(wave([5, 6, 7, 8, 0], [(0, 2), (1, 1), (2, 2)], "fh"), refs) == []  # lossy by design
    stuck = Wave(0, "ue0w0", "greedy", ["p0"], [{"prompt_id": "p0", "tokens": [], "error": "timeout"}], [])
    assert prompt_violations(stuck, refs)[0].startswith("stuck")
    assert journal_violations([wave([5, 6, 7, 8], [])], CLEAN)[0].startswith("duplicated: session ue0w0-0")
    assert journal_violations([wave([5, 6, 7, 8, 9, 9], [])], CLEAN)[0].startswith("lost: session ue0w0-0")


def test_recovery_is_from_the_faults_end_to_each_touched_ues_next_commit_and_rss_from_warm_up() -> None:
    faults = [{"kind": "outage", "start": 4.0, "end": 10.0, "touched": [0, 1, 2, 3, 4], "bound_s": 11.0},
              {"kind": "ue_stop", "start": 10.5, "end": 13.0, "touched": [1], "bound_s": 7.5}]
    waves = {0: [(3.0, 0), (11.5, 0)], 1: [(2.0, 0), (14.0, 0)], 2: [(3.0, 0)], 3: [(15.0, 0)],
             4: [(3.0, 0), (12.0, 1)]}
    recs = recoveries(faults, waves)
    assert [(r["kind"], r["ue"], r["recovery_s"], r["superseded"]) for r in recs] == [
        ("outage", 0, 1.5, False), ("outage", 1, 4.0, True),  # 1: its round waited on the ue_stop; 2: nothing
        ("ue_stop", 1, 1.0, False)]  # left; 3: not at work; 4: its wave ended (a new wave's start is no recovery)
    samples = [(t, 7, 100 if t < 10 else 200 + t) for t in range(0, 40)]  # idle, then working: +29/210 once warm
    assert abs(rss_growth(samples, 5.0, [ev(5.0, "commit", pid=7)])[7] - (239 / 210 - 1)) < 1e-9
    assert rss_growth(samples, 5.0, []) == {}  # never committed: never warm, not judged
