"""Per-round and end-to-end latency (SPEC eqs. 14, 16, 18-22) against hand-computed values."""
import pytest

from channel.csi import CSI
from wisv.timing.compute import ModelDims
from wisv.timing.hardware import HardwareProfile
from wisv.timing.latency import PayloadBits
from wisv.timing.roundtime import (
    Deployment,
    RoundInputs,
    e2e_s,
    round_time_s,
    round_times,
    rounds_s,
    t_draft_s,
    t_head_s,
    t_verify_s,
)

# drafter: f_d(l) = 2 * (4*l*4 + 8*16 + 6*4*8) + 2*4*10 = 32 l + 720
DRAFTER = ModelDims(n_layers=2, d_model=4, d_ff=8, vocab=10, n_heads=2, n_kv_heads=1)
# target:  f_t(l) = 1 * (4*l*8 + 8*64 + 6*8*16) + 2*8*10 = 32 l + 1440
TARGET = ModelDims(n_layers=1, d_model=8, d_ff=16, vocab=10, n_heads=2, n_kv_heads=2)
UE = HardwareProfile("ue", peak_tflops=1e-6, eta=0.5, source="test", role="ue")  # 5e5 FLOP/s
EDGE = HardwareProfile("edge", peak_tflops=1e-6, eta=1.0, source="test", role="edge")  # 1e6 FLOP/s
PB = PayloadBits(b_tok=10, b_h=16, b_idx=4, d_d=4, vocab=10, o_up=80, o_dn=40)  # s_h = 64, s_fb = 14
DEP = Deployment(DRAFTER, TARGET, UE, EDGE, PB, head_hidden=2, csi_dim=3)  # d_in = 4 + 8 + 3 = 15
CSI_1_2 = CSI(rate_up_mbps=1.0, rate_down_mbps=2.0, rtt_ms=10.0)

# K = 2, L = 3, m = 1
DRAFT = (816 + 848) / 5e5  # eq. 14: f_d(3) + f_d(4) at 5e5 FLOP/s
VERIFY = (1568 + 1600) / 1e6  # eq. 16: f_t(4) + f_t(5) at 1e6 FLOP/s
HEAD = 2 * (15 * 2 + 2) / 1e6  # eq. 17: one queried position
FEEDBACK = (14 + 40) / 2e6  # (s_fb + o_dn) on the 2 Mbit/s downlink
COMM = {
    "greedy": (2 * 10 + 80) / 1e6 + FEEDBACK + 0.01,
    "reject": (2 * 10 + 2 * 10 * 16 + 80) / 1e6 + FEEDBACK + 0.01,
    "fh": (2 * 10 + 2 * 64 + 80) / 1e6 + FEEDBACK + 0.01,  # eq. 6
    "sh": (2 * 10 + 80) / 1e6 + FEEDBACK + 0.01 + (4 + 40) / 2e6 + (64 + 80) / 1e6 + 0.01,  # eq. 10
    "tree": (2 * (10 + 4) + 80) / 1e6 + (10 + 2 * 4 + 40) / 2e6 + 0.01,  # ids + parents up; token + path down
}


def test_compute_terms_by_hand():
    assert t_draft_s(DRAFTER, 3, 2, UE) == pytest.approx(DRAFT)
    assert t_verify_s(TARGET, 3, 2, EDGE) == pytest.approx(VERIFY)
    assert t_head_s(1, DEP.head_d_in, DEP.head_hidden, EDGE) == pytest.approx(HEAD)
    assert t_head_s(0, 15, 2, EDGE) == 0.0


@pytest.mark.parametrize("protocol", ["greedy", "reject", "fh", "sh", "tree"])
def test_round_by_hand(protocol):
    """Eqs. 18/19 for fh/sh; greedy and reject pay no head."""
    rt = round_times(RoundInputs(protocol, k=2, l=3, m=1), CSI_1_2, DEP)
    head = HEAD if protocol in ("fh", "sh") else 0.0
    assert (rt.draft_s, rt.verify_s, rt.head_s) == pytest.approx((DRAFT, VERIFY, head))
    assert rt.comm_s == pytest.approx(COMM[protocol])
    total = round_time_s(RoundInputs(protocol, 2, 3, 1), CSI_1_2, DEP)
    assert total == pytest.approx(rt.total_s)
    assert total == pytest.approx(DRAFT + VERIFY + head + COMM[protocol])


def test_sh_without_mismatch_pays_one_rtt_and_no_head():
    rt = round_times(RoundInputs("sh", k=2, l=3, m=0), CSI_1_2, DEP)
    assert rt.comm_s == pytest.approx(COMM["greedy"]) and rt.head_s == 0.0


def test_e2e_is_the_sum_of_rounds():
    rounds = [round_time_s(RoundInputs("fh", 2, l, 1), CSI_1_2, DEP) for l in (3, 6, 9)]
    assert e2e_s(rounds) == pytest.approx(sum(rounds))
    assert e2e_s(iter(rounds)) == pytest.approx(sum(rounds)) and e2e_s([]) == 0.0


@pytest.mark.parametrize("kwargs,match", [({"protocol": "auto"}, "protocol"), ({"k": 0}, "K"), ({"l": -1}, "L"),
                                          ({"m": 9}, "m")])
def test_round_inputs_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RoundInputs(**{**{"protocol": "fh", "k": 8, "l": 10, "m": 1}, **kwargs})


# ---- monotonicity on the paper's deployment (Llama-3.2-1B on Jetson AGX Orin, Llama-3.1-8B on A40) --------

PAPER = Deployment.paper_llama()


def test_verify_grows_with_context_and_block_draft_with_block():
    assert t_verify_s(PAPER.target, 400, 8, PAPER.edge) > t_verify_s(PAPER.target, 100, 8, PAPER.edge)
    assert t_verify_s(PAPER.target, 100, 16, PAPER.edge) > t_verify_s(PAPER.target, 100, 8, PAPER.edge)
    assert t_draft_s(PAPER.drafter, 100, 16, PAPER.ue) > t_draft_s(PAPER.drafter, 100, 8, PAPER.ue)


@pytest.mark.parametrize("csi", [CSI.symmetric(20.0, 5.0), CSI.symmetric(500.0, 50.0), CSI(10.0, 100.0, 20.0, 0.1)])
@pytest.mark.parametrize("k", [4, 10, 32])
def test_fh_round_slower_than_greedy_on_same_link(csi, k):
    fh = round_time_s(RoundInputs("fh", k, 200, 1), csi, PAPER)
    greedy = round_time_s(RoundInputs("greedy", k, 200, 1), csi, PAPER)
    assert fh > greedy


def test_reject_is_slowest_at_low_rate():
    csi = CSI.symmetric(20.0, 50.0)
    t = {p: round_time_s(RoundInputs(p, 10, 200, 1), csi, PAPER) for p in ("greedy", "reject", "fh", "sh")}
    assert max(t, key=t.get) == "reject"


@pytest.mark.parametrize("k,latency_s,rounds", [(10, 7.616, 31.912), (64, 24.272, 19.272)])
def test_paper_scale_plausibility(k, latency_s, rounds):
    """Default hardware profiles land within 2x of the paper's greedy round time (Table I, 500 Mbit/s, 50 ms)."""
    predicted = round_time_s(RoundInputs("greedy", k, 300, 1), CSI.symmetric(500.0, 50.0), PAPER)
    assert 0.5 < predicted / (latency_s / rounds) < 2.0


def test_rounds_s_sums_rounds_under_the_csi_in_force():
    dep = Deployment.paper_llama()
    good, poor = CSI.symmetric(500, 5), CSI.symmetric(2, 50)
    first = round_time_s(RoundInputs("fh", 4, 10, 1), good, dep)
    expect = first + round_time_s(RoundInputs("fh", 1, 15, 0), poor, dep)  # K = 0 is charged as K = 1
    got = rounds_s([(4, 10, 1), (0, 15, 0)], "fh", lambda t: good if t < first / 2 else poor, dep)
    assert got == pytest.approx(expect)
    assert rounds_s([], "greedy", lambda t: good, dep) == 0.0
