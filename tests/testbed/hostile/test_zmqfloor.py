"""The bare ZeroMQ round floor: a spawned echo server on loopback, timed rounds, and a clean stop."""
from testbed.hostile.zmqfloor import round_floor


def test_round_floor_measures_and_stops():
    f = round_floor(n=10, gap_s=0.001, compute_s=0.001)
    assert f["n"] == 10 and 0 < f["median_ms"] < 50 and f["mean_ms"] > 0
    assert f["compute_ms"] == 1.0 and f["gap_ms"] == 1.0
