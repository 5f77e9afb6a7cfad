"""Mahimahi <-> CSI traces: parsing, window rates, the 1 s round trip within 2%, outages as silent windows."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channel.csi import CSI
from channel.csitrace import CSITrace
from channel.mahimahi import (
    MTU_BITS,
    format_mahimahi,
    mahimahi_to_trace,
    parse_mahimahi,
    trace_duration_s,
    trace_to_mahimahi,
    window_counts,
)


def test_parse_repeats_and_errors():
    assert parse_mahimahi("1\n1\n3\n\n4\n").tolist() == [1, 1, 3, 4]
    with pytest.raises(ValueError, match=r"up.txt: line 3: time 2 ms is before"):
        parse_mahimahi("1\n5\n2\n", "up.txt")
    with pytest.raises(ValueError, match=r"x: line 2: expected a time in whole ms, got '1.5'"):
        parse_mahimahi("1\n1.5\n", "x")
    with pytest.raises(ValueError, match="no delivery times"):
        parse_mahimahi("\n", "x")


def test_window_counts_loop_and_slot():
    t = np.array([1, 1000, 1001, 2000])  # ms 1000 is in the first window, 1001 in the second
    assert window_counts(t, 1000, 4).tolist() == [2, 2, 2, 2]  # the 2 s loop repeats
    assert window_counts(np.array([500, 1500]), 1000, 3).tolist() == [1, 2, 1]  # 1.5 s loop: 500 1500 2000 3000


def test_rate_of_a_constant_trace():
    t = np.repeat(np.arange(1, 1001), 1)  # one packet per ms for 1 s: 12 Mbit/s
    tr = mahimahi_to_trace(t, t, rtt_ms=30.0, window_s=1.0)
    assert len(tr) == 1 and tr.csis[0] == CSI(12.0, 12.0, 30.0)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.floats(1.0, 60.0), st.floats(1.0, 60.0)), min_size=2, max_size=6))
def test_round_trip_within_2_percent_per_window(rates):
    """our trace (1 s rows) -> Mahimahi -> our trace (1 s windows): every window's rates within 2%."""
    trace = CSITrace(tuple(float(i) for i in range(len(rates))), tuple(CSI(u, d, 20.0) for u, d in rates))
    d = trace_duration_s(trace, None)
    back = mahimahi_to_trace(trace_to_mahimahi(trace, "up", d), trace_to_mahimahi(trace, "down", d), 20.0, 1.0)
    assert back.t_s == trace.t_s
    for a, b in zip(trace.csis, back.csis):
        assert b.rate_up_mbps == pytest.approx(a.rate_up_mbps, rel=0.02)
        assert b.rate_down_mbps == pytest.approx(a.rate_down_mbps, rel=0.02)
        assert b.rtt_ms == 20.0


def test_outage_round_trips_as_silence():
    trace = CSITrace((0.0, 1.0, 2.0), (CSI(5, 5, 10),) * 3, outage_spans=((1.0, 2.0),))
    up = trace_to_mahimahi(trace, "up", 3.0)
    assert not ((up > 1000) & (up <= 2000)).any()  # nothing delivered in the outage
    back = mahimahi_to_trace(up, trace_to_mahimahi(trace, "down", 3.0), 10.0, 1.0)
    assert back.outage_spans == ((1.0, 2.0),)


def test_writer_ends_on_the_period_and_counts_bits():
    trace = CSITrace((0.0, 0.5), (CSI(1.2, 2.4, 0), CSI(2.4, 1.2, 0)))
    up = trace_to_mahimahi(trace, "up", 1.0)
    assert up[-1] == 1000 and len(up) == int((0.6e6 + 1.2e6) / MTU_BITS)
    assert format_mahimahi(up[:2]) == f"{up[0]}\n{up[1]}\n"


@pytest.mark.parametrize("trace, msg", [
    (CSITrace.constant(CSI(5, 5, 0)), "give --duration-s"),
])
def test_writer_errors(trace, msg):
    with pytest.raises(ValueError, match=msg):
        trace_duration_s(trace, None)
    with pytest.raises(ValueError, match="unlimited rate"):
        trace_to_mahimahi(CSITrace.constant(CSI.ideal()), "up", 1.0)
