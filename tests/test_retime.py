"""Re-timing a live run's prompts under another link (wisv/timing/retime.py): the compute kept, the link swapped."""
import math

import pytest

from channel.csi import CSI
from wisv.timing.retime import open_link_s, retime_prompt, retime_run, round_link_s

GOOD = CSI(200.0, 200.0, 5.0)
POOR = CSI(2.0, 2.0, 50.0)


def rows(n: int, up: int = 100, down: int = 40, exchanges: int = 1, dt: float = 0.1) -> list[dict]:
    return [{"uplink_bytes": up, "downlink_bytes": down, "exchanges": exchanges, "t_arrival_s": dt * (i + 1)}
            for i in range(n)]


def test_the_same_link_leaves_the_time_alone():
    r = rows(5)
    assert retime_prompt(1.0, r, 20, lambda _: GOOD, lambda _: GOOD) == pytest.approx(1.0)


def test_a_longer_rtt_costs_one_rtt_per_exchange_and_the_open():
    r = rows(5)
    slow = CSI(200.0, 200.0, 45.0)
    assert retime_prompt(1.0, r, 20, lambda _: GOOD, lambda _: slow) == pytest.approx(1.0 + 6 * 0.040)


def test_a_slower_rate_costs_the_bytes_serialized():
    r = rows(3, up=1000, down=500, exchanges=0)
    slow = CSI(1.0, 2.0, 5.0)
    gain = sum(slow.uplink_s(1000) + slow.downlink_s(500) - GOOD.uplink_s(1000) - GOOD.downlink_s(500) for _ in r)
    gain += slow.uplink_s(80) - GOOD.uplink_s(80)  # the OPEN's 20 ids
    assert retime_prompt(1.0, r, 20, lambda _: GOOD, lambda _: slow) == pytest.approx(1.0 + gain)


def test_a_trace_is_read_where_each_round_starts_on_the_new_clock():
    r = rows(4, dt=0.1)
    at = lambda t: GOOD if t < 0.25 else POOR  # noqa: E731
    got = retime_prompt(0.4, r, 0, lambda _: GOOD, at)
    # the OPEN and rounds 0-2 start before 0.25 s (round 2 at 0.2 s); round 3 at 0.3 s meets the poor link
    expect = 0.4 + round_link_s(r[3], POOR) - round_link_s(r[3], GOOD)
    assert got == pytest.approx(expect)
    # starting later in the trace, every round meets it
    late = retime_prompt(0.4, r, 0, lambda _: GOOD, at, t0_s=1.0)
    assert late == pytest.approx(0.4 + sum(round_link_s(x, POOR) - round_link_s(x, GOOD) for x in r)
                                 + open_link_s(0, POOR) - open_link_s(0, GOOD))


def test_never_below_the_compute_and_missing_fields_count_nothing():
    r = [{"uplink_bytes": None, "downlink_bytes": math.nan, "exchanges": 3, "t_arrival_s": None}]
    slow, fast = CSI(10.0, 10.0, 100.0), CSI(10.0, 10.0, 0.0)
    assert retime_prompt(0.2, r, 0, lambda _: slow, lambda _: fast) == pytest.approx(0.2 - 0.4)  # 4 RTTs saved
    assert retime_prompt(0.2, r, 0, lambda _: slow, lambda _: fast) >= 0.2 - 0.4
    assert retime_prompt(0.3, r, 0, lambda _: CSI(10, 10, 200.0), lambda _: fast) == pytest.approx(0.3 - 0.8)
    with pytest.raises(ValueError):
        retime_prompt(-1.0, r, 0, lambda _: slow, lambda _: fast)


def test_a_run_lays_its_prompts_end_to_end_on_the_new_clock():
    at = lambda t: GOOD if t < 0.85 else POOR  # noqa: E731
    prompts = [(0.8, rows(2), 10), (0.8, rows(2), 10)]
    first, second = retime_run(prompts, lambda _: GOOD, at)
    assert first == pytest.approx(retime_prompt(0.8, rows(2), 10, lambda _: GOOD, at))
    assert second == pytest.approx(retime_prompt(0.8, rows(2), 10, lambda _: GOOD, at, t0_s=first))
    assert second > first  # the second prompt meets the poor span
