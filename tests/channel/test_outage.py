"""Link outages: the pure span arithmetic, trace rows and flags, the link model, the relay holding bytes, the
simulator."""
import math
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from channel.csi import CSI
from channel.csitrace import CSITrace, load_trace, save_trace
from channel.emulator import EmulatorConfig, LinkConfig, LinkEmulator
from channel.linkmodel import DirParams, Link
from channel.outage import Outages, parse_outages
from testbed.common.link import LinkSpec
from tests.channel.test_emulator import connect, echo_port, recv_exactly  # noqa: F401  (echo_port: a fixture)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "scripts" / "link" / "traces" / "outage_5s.csv"


@pytest.mark.parametrize("text,spans", [
    ("", []), ("10:5", [(10.0, 15.0)]), ("10:5, 30:2.5", [(10.0, 15.0), (30.0, 32.5)]), ("0:0.5,", [(0.0, 0.5)]),
])
def test_parse_outages(text, spans):
    assert parse_outages(text) == spans


@pytest.mark.parametrize("text", ["10", "a:5", "10:0", "-1:5", "10:inf", "10:-2"])
def test_parse_outages_rejects_bad_periods(text):
    with pytest.raises(ValueError, match="START_S:DURATION_S"):
        parse_outages(text)


def test_spans_are_merged_and_looked_up():
    o = Outages.make([(20.0, 21.0), (2.0, 5.0), (4.0, 7.0)])
    assert o.spans == ((2.0, 7.0), (20.0, 21.0))
    assert (o.end_of(1.0), o.end_of(2.0), o.end_of(6.9), o.end_of(7.0), o.end_of(20.5)) == (1.0, 7.0, 7.0, 7.0, 21.0)
    assert o.overlap_s(0.0, 30.0) == 6.0 and o.overlap_s(3.0, 4.0) == 1.0 and o.overlap_s(8.0, 19.0) == 0.0
    assert o.stretch(1.0, 2.0) == 8.0  # 1 s up, paused 2..7, 1 s more
    assert o.stretch(3.0, 1.0) == 8.0  # starts in the outage: waits for its end
    assert o.stretch(8.0, 1.0) == 9.0 and not Outages()


def test_looping_outages_repeat_with_the_period():
    o = Outages.make([(2.0, 3.0)], period_s=4.0)
    assert o.end_of(6.5) == 7.0 and o.end_of(5.0) == 5.0
    assert o.overlap_s(0.0, 10.0) == 2.0
    assert o.stretch(0.0, 5.0) == 6.0  # 0..2 and 3..6
    with pytest.raises(ValueError, match="past the trace's loop period"):
        Outages.make([(3.0, 5.0)], period_s=4.0)
    with pytest.raises(ValueError, match="no time up"):
        Outages.make([(0.0, 4.0)], period_s=4.0)


def test_the_example_trace_has_one_5_s_outage(tmp_path):
    trace = load_trace(EXAMPLE)
    assert trace.outages.spans == ((10.0, 15.0),)
    assert trace.at(12.0) == CSI.symmetric(20.0, 20.0)  # the CSI recorded as in force while it is down
    save_trace(trace, tmp_path / "again.csv")
    assert load_trace(tmp_path / "again.csv") == trace


def test_trace_outage_column_errors(tmp_path):
    head = "t_s,rate_up_mbps,rate_down_mbps,rtt_ms,per,outage\n"
    (tmp_path / "last.csv").write_text(head + "0,20,20,20,0,0\n5,20,20,20,0,1\n")
    with pytest.raises(ValueError, match="never end"):
        load_trace(tmp_path / "last.csv")
    (tmp_path / "bad.csv").write_text(head + "0,20,20,20,0,2\n5,20,20,20,0,0\n")
    with pytest.raises(ValueError, match="line 2: column 'outage': expected 0 or 1"):
        load_trace(tmp_path / "bad.csv")
    with pytest.raises(ValueError, match="row times"):
        save_trace(CSITrace.constant(CSI.symmetric(20, 20)).with_outages([(1.0, 2.0)]), tmp_path / "x.csv")


def test_flags_add_outages_to_a_trace_and_to_a_fixed_link():
    spec = LinkSpec(csi_trace=str(EXAMPLE), outages="30:2")
    assert spec.trace().outages.spans == ((10.0, 15.0), (30.0, 32.0))
    fixed = LinkSpec(rate_up_mbps=None, rate_down_mbps=None, rtt_ms=0.0, outages="1:2")
    assert fixed.emulated and fixed.trace().outages.spans == ((1.0, 3.0),)
    assert fixed.emulator_config(5555).outages == "1:2"
    assert EmulatorConfig(forward="127.0.0.1:1", outages="1:2").link_config().outages == "1:2"
    with pytest.raises(ValueError, match="START_S:DURATION_S"):
        LinkSpec(outages="1")


def test_link_holds_chunks_through_an_outage():
    link = Link(lambda _t: DirParams(1.0, 0.0, 10.0), np.random.default_rng(0), t0_s=100.0,
                outages=Outages.make([(1.0, 3.0)]))
    before = link.admit(100.5, 1250)  # 10 ms serialization + 10 ms delay, before the outage
    assert (before.serialize_done_s, before.deliver_at_s) == pytest.approx((100.51, 100.52))
    during = link.admit(101.5, 1250)  # arrives in the outage: waits for its end
    assert (during.serialize_done_s, during.deliver_at_s) == pytest.approx((103.01, 103.02))
    across = link.admit(100.995, 1250)  # serializing when it starts: paused for 2 s
    assert across.serialize_done_s == pytest.approx(103.02) and across.deliver_at_s >= during.deliver_at_s


def test_delivery_that_falls_in_an_outage_waits_for_its_end():
    link = Link(lambda _t: DirParams(math.inf, 0.0, 100.0), np.random.default_rng(0),
                outages=Outages.make([(1.0, 2.0)]))
    slot = link.admit(0.95, 100)  # leaves at once, would arrive at 1.05: in the outage
    assert slot.serialize_done_s == pytest.approx(0.95) and slot.deliver_at_s == pytest.approx(2.0)


def test_the_relay_holds_bytes_until_the_outage_ends(echo_port):  # noqa: F811
    cfg = LinkConfig(target_port=echo_port, outages="0.3:0.6")
    with LinkEmulator(cfg) as emu:
        assert not emu.fast_path
        with connect(emu.port) as s:
            s.sendall(b"before")
            assert recv_exactly(s, 6) == b"before"
            time.sleep(max(0.0, emu.t0_s + 0.35 - time.perf_counter()))
            t_sent = time.perf_counter()
            s.sendall(b"during")
            assert recv_exactly(s, 6) == b"during"  # held, not lost
            assert time.perf_counter() >= emu.t0_s + 0.9 - 1e-3 and time.perf_counter() - t_sent > 0.5


def test_simulated_rounds_pause_through_an_outage():
    from testbed.sim.resolve import links_of
    from tests.wisv.timing.test_roundtime import DEP
    from wisv.timing.roundtime import rounds_s
    csi = CSI.symmetric(20.0, 20.0)
    rounds = [(4, 10 + 5 * i, 0) for i in range(20)]
    base = rounds_s(rounds, "greedy", lambda _t: csi, DEP)
    out = Outages.make([(base / 2, base / 2 + 5.0)])
    assert rounds_s(rounds, "greedy", lambda _t: csi, DEP, outages=out) == pytest.approx(base + 5.0)
    [link] = links_of(SimpleNamespace(csi_trace=str(EXAMPLE)))  # the simulator reads the same trace rows
    assert link.outages.spans == ((10.0, 15.0),) and link.outages.period_s == 20.0  # it loops the trace
