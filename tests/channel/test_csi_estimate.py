"""The UE's live CSI estimate (channel/measure.py): robust to host noise, within ±20% of the link in 95% of rounds.

A simulated link stands in for the emulator: every exchange takes RTT + its bytes' serialization + host noise
(one-sided: a loaded host only ever adds time; a few long stalls).  The UE's loop is replayed as testbed.ue runs it:
a handshake per prompt (RTT pings, probes sized by the estimator), then rounds of a few hundred bytes each way.
scripts/bench/csi.py measures the same on the real emulator (results/bench_csi/bench_csi.json).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from channel.measure import MIN_SAMPLES, PROBE_BYTES_BOUNDS, CSIEstimator

PING_BYTES = 60  # a PING or PONG without payload on the wire, bytes
TOL, GOAL = 0.20, 0.95  # issue 26: within ±20% of the configured rate in at least 95% of rounds


class SimLink:
    """Exchange times over a link of rate_mbps and rtt_ms, with seeded host noise (s)."""

    def __init__(self, rate_mbps: float, rtt_ms: float, seed: int, stall_p: float = 0.05):
        self.rate, self.rtt_s = rate_mbps * 1e6, rtt_ms / 1e3
        self.rng, self.stall_p = np.random.default_rng(seed), stall_p

    def noise_s(self) -> float:
        """~1.5 ms mean of host delay, and now and then a 10-40 ms stall (the issue's loaded host)."""
        stall = self.rng.uniform(0.010, 0.040) if self.rng.random() < self.stall_p else 0.0
        return 0.0005 + self.rng.exponential(0.001) + stall

    def exchange_s(self, up_bytes: int, down_bytes: int) -> float:
        return self.rtt_s + (up_bytes + down_bytes) * 8 / self.rate + self.noise_s()


def handshake(est: CSIEstimator, link: SimLink) -> None:
    """What testbed.live.ue.client.handshake does, over the simulated link."""
    for _ in range(est.probes_wanted()):
        est.add_rtt(link.exchange_s(PING_BYTES, PING_BYTES))
    for d in ("up", "down"):
        for _ in range(est.probes_wanted(d)):
            n = est.probe_bytes(d)
            up, down = (n, PING_BYTES) if d == "up" else (PING_BYTES, n)
            est.add_probe(d, n, link.exchange_s(up, down))


def replay(rate_mbps: float, rtt_ms: float, seed: int, prompts: int = 20, rounds: int = 10) -> np.ndarray:
    """The estimate each round is drafted with, as estimate / link - 1: [rounds, 3] (rate up, rate down, RTT)."""
    est, link, errors = CSIEstimator(), SimLink(rate_mbps, rtt_ms, seed), []
    rng = np.random.default_rng(seed + 1)
    for _ in range(prompts):
        handshake(est, link)
        for _ in range(rounds):
            c = est.csi()
            errors.append([c.rate_up_mbps / rate_mbps - 1, c.rate_down_mbps / rate_mbps - 1, c.rtt_ms / rtt_ms - 1])
            exchanges = int(rng.integers(1, 3))
            up, down = int(rng.integers(200, 800)), int(rng.integers(150, 250))
            t = sum(link.exchange_s(up // exchanges, down // exchanges) for _ in range(exchanges))
            est.add_round(t, up, down, exchanges)
    return np.array(errors)


@pytest.mark.parametrize("rate_mbps, rtt_ms", [(20.0, 20.0), (3.0, 45.0)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rate_within_20_percent_in_95_percent_of_rounds(rate_mbps, rtt_ms, seed):
    err = replay(rate_mbps, rtt_ms, seed)
    both = (np.abs(err[:, 0]) <= TOL) & (np.abs(err[:, 1]) <= TOL)
    assert both.mean() >= GOAL, f"rate within ±20% in {both.mean():.1%} of rounds"
    assert np.all(np.abs(err[:, :2]) < 0.5)  # never the 6554 Mbit/s on a 20 Mbit/s link
    assert np.quantile(err[:, 2], 0.95) < 0.1  # RTT: the link's plus the least host delay (0.5 ms here)


def test_the_old_8kib_probe_at_20mbps_is_dropped_not_floored():
    """Its 3.3 ms of serialization, less a noisy RTT, once gave 6554 Mbit/s; below min_serialization_ms it is
    dropped, and the next probe is larger."""
    est = CSIEstimator()
    est.add_rtt(0.0210)
    assert not est.add_probe("up", 8192, 0.0210 + 0.0015)  # 1.5 ms of 'serialization' left after the RTT
    assert est.rate_up_mbps is None and est.dropped["up"] == 1
    assert est.probe_bytes("up") == 4 * est.first_probe_bytes
    assert est.csi().rate_up_mbps == math.inf  # unmeasured: unlimited, not a made-up number


@pytest.mark.parametrize("nbytes, ser_s, kept", [
    (125_000, 0.050, True),  # 20 Mbit/s
    (125_000, 0.009, False),  # too short to tell from host noise
    (125_000, -0.003, False),  # the RTT estimate exceeded the exchange
    (20, 0.010, True),  # 0.016 Mbit/s: slow but plausible
    (1, 0.010, False),  # 0.0008 Mbit/s: below RATE_BOUNDS_MBPS
])
def test_rate_samples_kept_or_dropped(nbytes, ser_s, kept):
    est = CSIEstimator()
    assert est.add_serialization("down", nbytes, ser_s) is kept
    assert est.samples("down") == int(kept) and est.dropped["down"] == int(not kept)


def test_rate_is_the_median_and_rtt_the_minimum_of_a_window():
    est = CSIEstimator(window=5)
    for rate in (20, 21, 19, 500, 20.5, 19.5):  # the first leaves the window; 500 is an outlier
        est.add_serialization("up", int(rate * 1e6 / 8 * 0.05), 0.05)
    assert est.samples("up") == 5 and est.rate_up_mbps == pytest.approx(20.5)
    for rtt_ms in (20.1, 20.5, 20.4, 35.0, 20.6, 60.0):  # 20.1 leaves the window
        est.add_rtt(rtt_ms / 1e3)
    assert est.rtt_ms == pytest.approx(20.4)


def test_probe_size_follows_the_estimate_within_bounds():
    est = CSIEstimator(probe_target_ms=50.0)
    assert est.probe_bytes("up") == est.first_probe_bytes
    est.add_serialization("up", 125_000, 0.05)  # 20 Mbit/s
    assert est.probe_bytes("up") == 125_000  # 50 ms at 20 Mbit/s
    est.add_serialization("down", 125_000 * 50, 0.05)  # 1 Gbit/s
    assert est.probe_bytes("down") == PROBE_BYTES_BOUNDS[1]


def test_first_handshake_probes_until_min_samples_then_once():
    est = CSIEstimator()
    assert est.probes_wanted() == MIN_SAMPLES and est.probes_wanted("up") == MIN_SAMPLES
    for _ in range(MIN_SAMPLES):
        est.add_rtt(0.020)
        est.add_serialization("up", 125_000, 0.05)
    assert est.probes_wanted() == 1 and est.probes_wanted("up") == 1
    for _ in range(MIN_SAMPLES):  # a link too fast to measure: dropped samples end the warm-up too
        est.add_serialization("down", 1000, 0.0001)
    assert est.probes_wanted("down") == 1


def test_a_round_with_a_dominant_direction_is_a_rate_sample_else_an_rtt_sample():
    est = CSIEstimator()
    est.add_rtt(0.020)
    est.add_serialization("up", 125_000, 0.05)  # 20 Mbit/s
    est.add_serialization("down", 125_000, 0.05)
    est.add_round(t_comm_s=0.020 + 0.100 + 0.0001, up_bytes=250_000, down_bytes=200, exchanges=1)  # 100 ms up
    assert est.samples("up") == 2 and est.samples() == 1
    est.add_round(t_comm_s=2 * 0.030 + 0.0004, up_bytes=500, down_bytes=500, exchanges=2)  # small: RTT 30 ms
    assert est.samples() == 2 and max(est.rtts_ms) == pytest.approx(30.0) and est.rtt_ms == pytest.approx(20.0)
    CSIEstimator().add_round(0.1, 10, 10, 1)  # no RTT yet: ignored, no error
