"""The auto protocol's rules, the protocol registry and wire byte accounting."""
import pytest

from channel.csi import CSI
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
    assert set(PROTOCOLS) == {"greedy", "reject", "fh", "sh", "ef", "auto", "tree", "server", "device"}


def test_zmtp_accounting():
    assert zmtp_frame_overhead(255) == 2 and zmtp_frame_overhead(256) == 9
    assert wire_bytes([b"a" * 10, b"b" * 300]) == 10 + 2 + 300 + 9
    assert PB.b_tok == 32 and PB.o_up > 0 and PB.o_dn > 0
