"""Communication model (SPEC eqs. 3-10) against hand-computed values."""
import math

import pytest

from channel.csi import CSI
from wisv.timing.latency import (
    PayloadBits,
    s_fh,
    s_greedy,
    s_reject,
    s_req,
    s_sh1,
    s_sh2,
    t_fh,
    t_sh,
    t_sh_expected,
    tx_s,
)

PB = PayloadBits(b_tok=10, b_h=16, b_idx=4, d_d=100, vocab=1000, o_up=80, o_dn=40)


def test_payloads_by_hand():
    assert PB.s_h == 1600 and PB.s_fb == 14                      # eqs. 3, 4
    assert s_fh(8, PB) == 8 * 10 + 8 * 1600 + 80                 # eq. 5
    assert s_sh1(8, PB) == s_greedy(8, PB) == 8 * 10 + 80        # eq. 7
    assert s_req(3, PB) == 3 * 4 + 40                            # eq. 8
    assert s_sh2(3, PB) == 3 * 1600 + 80                         # eq. 9
    assert s_reject(8, PB) == 8 * 10 + 8 * 1000 * 16 + 80


def test_paper_packing():
    pb = PayloadBits.paper(vocab=128256, d_d=2048)
    assert pb.b_tok == 17 and pb.s_h == 2048 * 16


def test_tx_time_with_per():
    assert tx_s(1e6, 1e6, 0.0) == pytest.approx(1.0)
    assert tx_s(1e6, 1e6, 0.5) == pytest.approx(2.0)
    assert tx_s(123, math.inf, 0.1) == 0.0


def test_fh_eq6_by_hand():
    csi = CSI(rate_up_mbps=1.0, rate_down_mbps=2.0, rtt_ms=50.0, per_up=0.2, per_down=0.0)
    up = (8 * 10 + 8 * 1600 + 80) / (1e6 * 0.8)
    down = (14 + 40) / 2e6
    assert t_fh(8, csi, PB) == pytest.approx(up + down + 0.05)


def test_sh_eq10_by_hand_and_extra_rtt_only_with_mismatch():
    csi = CSI(1.0, 1.0, 20.0)
    base = (8 * 10 + 80) / 1e6 + (14 + 40) / 1e6 + 0.02
    assert t_sh(8, 0, csi, PB) == pytest.approx(base)
    extra = (2 * 4 + 40) / 1e6 + (2 * 1600 + 80) / 1e6 + 0.02
    assert t_sh(8, 2, csi, PB) == pytest.approx(base + extra)


def test_sh_expected_interpolates():
    csi = CSI(5.0, 5.0, 30.0)
    assert t_sh_expected(8, 0.0, 0.0, csi, PB) == pytest.approx(t_sh(8, 0, csi, PB))
    assert t_sh_expected(8, 2.0, 1.0, csi, PB) == pytest.approx(t_sh(8, 2, csi, PB))
    half = t_sh_expected(8, 1.0, 0.5, csi, PB)
    assert half == pytest.approx(0.5 * t_sh(8, 0, csi, PB) + 0.5 * t_sh(8, 2, csi, PB))


@pytest.mark.parametrize("rate,rtt,better", [(2.0, 50.0, "fh"), (2.0, 1.0, "sh"), (500.0, 50.0, "fh")])
def test_fh_vs_sh_tradeoff(rate, rtt, better):
    """Low rate + short RTT favours SH (fewer hidden bytes); long RTT favours FH (one round trip)."""
    csi = CSI(rate, rate, rtt)
    fh, sh = t_fh(8, csi, PB), t_sh_expected(8, 1.0, 0.6, csi, PB)
    assert (fh < sh) == (better == "fh")
