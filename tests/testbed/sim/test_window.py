"""The simulator's window replay (testbed/sim/window.py): exact against the speculative loop, and auto on a trace."""
import pytest

from channel.csi import CSI
from channel.csitrace import CSITrace
from testbed.sim.window import MatchProfile, auto, by_state, compare, fixed, match_profile, passes, replay, run_length
from tests.tiny_pair import make_pair
from wisv.decoding.speculative import speculative_generate
from wisv.timing.compute import ModelDims
from wisv.timing.hardware import HardwareProfile
from wisv.timing.latency import PayloadBits
from wisv.timing.roundtime import Deployment
from wisv.timing.window import WindowTracker

DIMS = ModelDims(n_layers=2, d_model=64, d_ff=128, vocab=100, n_heads=4, n_kv_heads=2)
DEP = Deployment(DIMS, DIMS, HardwareProfile("ue", 1e-4, 1.0, source="test", role="ue", pass_overhead_s=0.001),
                 HardwareProfile("edge", 1e-3, 1.0, source="test", role="edge", phase_overhead_s=0.004),
                 PayloadBits.paper(vocab=100, d_d=64))
GOOD, POOR = CSI.symmetric(200, 5), CSI.symmetric(3, 60)
TRACE = CSITrace((0.0, 1.0), (GOOD, POOR), loop=True)


def test_run_length():
    m = (True, True, False, True)
    assert [run_length(m, 0, k) for k in (1, 2, 3, 4)] == [1, 2, 2, 2]
    assert run_length(m, 3, 4) == 1 and run_length(m, 4, 4) == 0


@pytest.mark.parametrize("k", [1, 3, 8])
def test_fixed_replay_equals_the_speculative_loop(k):
    drafter, target = make_pair()
    prompt = [1, 5, 9, 13]
    prof = match_profile(drafter, target, "p", prompt, 40, 60)
    out = speculative_generate(drafter, target, prompt, max_new_tokens=40, draft_len=k, eos_token_id=60)
    rows = replay(prof, fixed(k), "greedy", lambda _t: GOOD, DEP, 0.0, 40)
    assert [r["drafted"] for r in rows] == [r.drafted for r in out.rounds]
    assert [r["accepted"] for r in rows] == [r.accepted for r in out.rounds]
    assert sum(r["committed"] for r in rows) == len(out.tokens) == prof.n


def profile(pattern: str, reps: int, pid: str = "p") -> MatchProfile:
    match = tuple(c == "1" for c in pattern * reps)
    return MatchProfile(pid, 10, match, tuple(0.95 if m else 0.2 for m in match), False)


@pytest.mark.slow
def test_oracle_and_auto_follow_the_state():
    profs = passes([profile("1111111110", 12)], 30)  # a drafter right 9 times in 10
    table, runs = compare(profs, "greedy", TRACE.at, [GOOD, POOR], DEP, [2, 4, 8, 16], 120, 32)
    lat = dict(zip(table["policy"], table["latency_s"]))
    assert lat["oracle"] <= min(lat[f"K={k}"] for k in (2, 4, 8, 16)) + 1e-9
    auto_rounds = runs["auto"]
    k_good = auto_rounds[auto_rounds["rtt_ms"] == 5]["window_k"].median()
    k_poor = auto_rounds[auto_rounds["rtt_ms"] == 60]["window_k"].median()
    assert k_poor > k_good  # the long RTT asks for a longer window
    assert lat["auto"] <= 1.05 * lat["oracle"]


def test_by_state_and_auto_policies():
    prof = profile("10", 20)
    assert by_state({POOR: 7}, 3)(prof, 0, 10, 40, POOR)[:2] == (7, 7)
    assert by_state({POOR: 7}, 3)(prof, 0, 10, 40, GOOD)[:2] == (3, 3)
    tracker = WindowTracker(1, 16)
    for _ in range(10):
        tracker.update(4, 0)  # a drafter that is never right
    k, most, stop = auto(tracker, "greedy", DEP)(prof, 0, 10, 40, POOR)
    assert k == most <= 2 and stop is not None


def test_draft_len_auto_flags():
    from config import ConfigError
    from testbed.live.ue.ueconfig import parse_draft_len
    from testbed.sim.cli import parse_args, parse_draft_lens
    assert parse_draft_len(["auto"]) == 0 and parse_draft_len(["12"]) == 12
    assert parse_draft_lens(["4,auto", "16"]) == [4, 0, 16]
    assert parse_args(["--draft-lens", "auto"]).draft_lens == [0]
    for bad in (["0"], ["x"]):
        with pytest.raises(ConfigError):
            parse_draft_len(bad)
    with pytest.raises(ConfigError):
        parse_draft_lens(["-3"])
