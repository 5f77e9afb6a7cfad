"""The auto protocol's rules, the protocol registry and wire byte accounting."""
import pytest

from channel.csi import CSI
from channel.measure import CSIEstimator, probe_rate_mbps
from protocols.accounting import wire_bytes, wire_payload_bits, zmtp_frame_overhead
from protocols.auto import MismatchStats, choose
from protocols.registry import PROTOCOLS, get_protocol
from wisv.timing.latency import t_fh, t_sh_expected

PB = wire_payload_bits(d_d=96, vocab=637)


@pytest.mark.parametrize("rtt,want", [(5.0, "sh"), (10.0, "sh"), (10.1, "fh"), (50.0, "fh")])
def test_rtt_rule(rtt, want):
    assert choose("rtt", CSI(20, 20, rtt), 8, MismatchStats(), PB) == want


@pytest.mark.parametrize("rate,rtt", [(r, t) for r in (0.5, 2, 20, 200) for t in (1, 5, 20, 50)])
def test_cost_rule_picks_the_cheaper_prediction(rate, rtt):
    csi, stats = CSI(rate, rate, rtt), MismatchStats(m_mean=1.5, p_any=0.7)
    pick = choose("cost", csi, 8, stats, PB)
    fh, sh = t_fh(8, csi, PB), t_sh_expected(8, 1.5, 0.7, csi, PB)
    assert pick == ("fh" if fh <= sh else "sh")


def test_cost_rule_follows_mismatch_history():
    csi = CSI(2, 2, 3)  # slow link, short RTT: SH wins when few rounds need a second exchange
    quiet, busy = MismatchStats(), MismatchStats()
    for _ in range(20):
        quiet.update(0)
        busy.update(8)
    assert choose("cost", csi, 8, quiet, PB) == "sh"
    assert busy.m_mean > 7 and quiet.p_any < 0.01


def test_unknown_rule_and_protocol():
    with pytest.raises(ValueError, match="unknown auto rule"):
        choose("magic", CSI(1, 1, 1), 8, MismatchStats(), PB)
    with pytest.raises(ValueError, match="unknown protocol 'fast'"):
        get_protocol("fast")
    assert set(PROTOCOLS) == {"greedy", "reject", "fh", "sh", "auto", "tree"}


def test_zmtp_accounting():
    assert zmtp_frame_overhead(255) == 2 and zmtp_frame_overhead(256) == 9
    assert wire_bytes([b"a" * 10, b"b" * 300]) == 10 + 2 + 300 + 9
    assert PB.b_tok == 32 and PB.o_up > 0 and PB.o_dn > 0


def test_csi_estimator():
    est = CSIEstimator(alpha=0.5)
    assert est.csi() is None
    est.add_rtt(0.020)
    est.add_rtt(0.040)
    assert est.rtt_ms == pytest.approx(30.0)
    est.add_probe("up", 10_000, 0.030 + 0.040)  # 80 kbit in 40 ms after one 30 ms RTT
    assert est.rate_up_mbps == pytest.approx(2.0)
    assert est.csi().rate_down_mbps == float("inf")
    assert probe_rate_mbps(1000, 0.001, 0.002) == pytest.approx(8000 / 1e-5 / 1e6)  # floored, no division by <= 0


def test_passive_rtt_from_rounds():
    est = CSIEstimator(alpha=1.0, rtt_ms=50.0, rate_up_mbps=8.0, rate_down_mbps=8.0)
    est.add_round(t_comm_s=0.020 * 2 + 0.002, up_bytes=1000, down_bytes=1000, exchanges=2)  # 2 ms serialization
    assert est.rtt_ms == pytest.approx(20.0)
    CSIEstimator().add_round(0.1, 10, 10, 1)  # no RTT yet: ignored, no error
