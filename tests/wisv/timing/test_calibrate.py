"""Local-profile calibration: the per-call time model, its least-squares fit, the record, the `local` lookup."""

import json
from dataclasses import replace

import pytest

from channel.csi import CSI
from wisv.timing.calibrate import (
    Calibration,
    CallTiming,
    ComputeFit,
    design_matrix,
    fit_chunk_overhead,
    fit_compute,
    fit_ends,
    fit_exchange_overhead,
    fit_start_overhead,
    load_calibration,
    profile_from_fit,
    save_calibration,
)
from wisv.timing.compute import ModelDims
from wisv.timing.hardware import HardwareProfile, get_profile, load_profile, save_profile
from wisv.timing.latency import PayloadBits
from wisv.timing.roundtime import (
    Deployment,
    RoundInputs,
    comm_s,
    n_weights,
    round_times,
    t_draft_s,
    t_prefill_s,
    t_verify_s,
)

A_PHASE, A_PASS, A_WEIGHT, RATE = 2e-3, 1e-3, 2e-9, 5e10  # 2 ms/phase, 1 ms/call, 2 ns/weight/call, 50 GFLOP/s


def _timing(role: str, passes: int, n_weights: float, flops: float) -> CallTiming:
    return CallTiming(role, passes, n_weights, flops,
                      A_PHASE + passes * (A_PASS + A_WEIGHT * n_weights) + flops / RATE)


def _synthetic() -> list[CallTiming]:
    """Drafting spans of K calls of a 4e5-weight model and single passes of a 3e6-weight model."""
    out = []
    for k in (1, 2, 4, 8, 16, 32):
        out.append(_timing("draft", k, 4e5, k * 1e6))
        out.append(_timing("verify", 1, 3e6, k * 6e6))
    return out


def test_predict_by_hand():
    fit = ComputeFit(A_PHASE, A_PASS, A_WEIGHT, RATE, 1, 1, 0.0, 0.0)
    # 2 ms + 8 calls * (1 ms + 2 ns * 4e5 = 0.8 ms) + 8e6 / 5e10 (0.16 ms) = 16.56 ms
    assert fit.predict_s(8, 4e5, 8e6) == pytest.approx(16.56e-3)
    assert design_matrix([CallTiming.make_dummy()]).tolist() == [[1.0, 8.0, 8 * 4e5, 0.0, 8e6]]
    multi = ComputeFit(A_PHASE, A_PASS, A_WEIGHT, RATE, 1, 1, 0.0, 0.0, multirow_overhead_s=3e-3)
    assert multi.predict_s(1, 4e5, 8e6, multirow=1) == pytest.approx(fit.predict_s(1, 4e5, 8e6) + 3e-3)


def test_fit_recovers_exact_coefficients():
    fit = fit_compute(_synthetic())
    assert fit.phase_overhead_s == pytest.approx(A_PHASE, rel=1e-6)
    assert fit.pass_overhead_s == pytest.approx(A_PASS, rel=1e-6)
    assert fit.weight_read_s == pytest.approx(A_WEIGHT, rel=1e-6)
    assert fit.flops_per_s == pytest.approx(RATE, rel=1e-6)
    assert (fit.n_used, fit.n_total) == (12, 12) and fit.rel_err_p90 < 1e-6


def test_fit_drops_a_slow_outlier():
    """A call that another process preempted (10x slower) is dropped; the rest still give the exact model."""
    data = _synthetic()
    t = data[4]
    data[4] = CallTiming(t.role, t.passes, t.n_weights, t.flops, t.seconds * 10)
    fit = fit_compute(data)
    assert fit.n_used == 11
    assert fit.pass_overhead_s == pytest.approx(A_PASS, rel=1e-4)
    assert fit.flops_per_s == pytest.approx(RATE, rel=1e-4)


def test_fit_errors():
    with pytest.raises(ValueError, match="at least 4"):
        fit_compute(_synthetic()[:3])
    same_size = [_timing("verify", 1, 3e6, 0.0) for _ in range(4)]  # no FLOPs: the rate is undetermined
    with pytest.raises(ValueError, match="FLOP rate"):
        fit_compute(same_size)
    with pytest.raises(ValueError, match="seconds > 0"):
        fit_compute([CallTiming("draft", 1, 1.0, 1.0, 0.0)] * 4)


def _two_ends() -> list[CallTiming]:
    """The UE's drafting phases (its own overheads) and the edge's verifications and decode streams (others), one
    FLOP rate: what a calibration on one machine times."""
    ue = [CallTiming("draft", k, 4e5, k * 1e6, 3e-3 + k * 0.5e-3 + k * 1e6 / RATE) for k in (1, 2, 4, 8, 16, 32)]
    edge = [CallTiming("verify", 1, 3e6, k * 6e6, 6e-3 + 2e-3 + 3e-3 + k * 6e6 / RATE, multirow=1)
            for k in (1, 2, 4, 8, 16, 32)]  # a verification's K + 1 rows: 3 ms more than a 1-row call
    edge += [CallTiming("decode", n, 3e6, n * 6e6, 6e-3 + n * 2e-3 + n * 6e6 / RATE) for n in (1, 4, 16, 48)]
    return ue + edge


def test_fit_ends_gives_each_end_its_own_overheads():
    """Each end's fit prices its own phases exactly, where one fit over both cannot; the UE takes the edge's rate."""
    data = _two_ends()
    fits = fit_ends(data)
    assert fits["edge"].flops_per_s == pytest.approx(RATE, rel=1e-6) == fits["ue"].flops_per_s
    for end, roles in (("ue", ("draft",)), ("edge", ("verify", "decode"))):
        for t in (t for t in data if t.role in roles):
            assert fits[end].predict_s(t.passes, t.n_weights, t.flops, t.multirow) == pytest.approx(t.seconds,
                                                                                                   rel=1e-6)
    assert fits["edge"].phase_overhead_s == pytest.approx(6e-3, rel=1e-6)  # the idle wait's cost, once a stream
    assert fits["edge"].multirow_overhead_s == pytest.approx(3e-3, rel=1e-6)  # what a multi-row call costs more
    assert profile_from_fit(fits["edge"], 0.1).multirow_overhead_s == fits["edge"].multirow_overhead_s
    joint = fit_compute(data)
    assert joint.rel_err_p90 > 0.05  # one set of overheads for both models misprices some phases


def test_fit_ends_needs_each_ends_timings():
    with pytest.raises(ValueError, match="the edge's fit needs at least 4 timings of verify/decode, got 0"):
        fit_ends([t for t in _two_ends() if t.role == "draft"])
    with pytest.raises(ValueError, match="flops_per_s"):
        fit_compute(_synthetic(), flops_per_s=0.0)


def test_profile_from_fit():
    fit = ComputeFit(A_PHASE, A_PASS, A_WEIGHT, RATE, 3, 3, 0.0, 0.0)
    p = profile_from_fit(fit, peak_tflops=0.1, source="test")  # 50 GFLOP/s of a 100 GFLOP/s peak
    assert (p.name, p.eta, p.peak_tflops) == ("local", 0.5, 0.1)
    assert (p.phase_overhead_s, p.pass_overhead_s, p.weight_read_s) == (A_PHASE, A_PASS, A_WEIGHT)
    assert p.effective_flops == pytest.approx(RATE)
    fast = profile_from_fit(fit, peak_tflops=0.01)  # measured peak below R: peak raised, eta = 1
    assert fast.eta == 1.0 and fast.peak_tflops == pytest.approx(0.05)


def test_fit_exchange_overhead_is_the_median_ratio():
    # ratios 1, 2, 10 ms per exchange -> 2 ms
    assert fit_exchange_overhead([0.010, 0.040, 0.050], [10, 20, 5]) == pytest.approx(0.002)
    assert fit_exchange_overhead([-0.01, -0.02, 0.001], [1, 1, 1]) == 0.0
    with pytest.raises(ValueError, match="equal"):
        fit_exchange_overhead([0.1], [1, 2])
    with pytest.raises(ValueError, match="at least one exchange"):
        fit_exchange_overhead([0.1], [0])


def test_fit_chunk_overhead_is_the_median_residual():
    assert fit_chunk_overhead([0.0002, 0.0003, 0.0009]) == pytest.approx(0.0003)
    assert fit_chunk_overhead([-0.001, -0.0001, 0.0002]) == 0.0  # a negative median is clipped
    with pytest.raises(ValueError, match="at least one chunk"):
        fit_chunk_overhead([])


def test_fit_start_overhead_is_the_median_residual():
    assert fit_start_overhead([0.020, 0.031, 0.045]) == pytest.approx(0.031)
    assert fit_start_overhead([-0.002, -0.001, 0.004]) == 0.0  # a negative median is clipped
    with pytest.raises(ValueError, match="at least one server-only prompt"):
        fit_start_overhead([])


def test_calibration_record_round_trip(tmp_path):
    prof = HardwareProfile("local", 0.1, 0.5, "test", pass_overhead_s=A_PASS, weight_read_s=A_WEIGHT)
    cal = Calibration(prof, exchange_overhead_s=0.0015, fit={"n_used": 3}, notes={"idle_gap_ms": 20.0})
    path = save_calibration(cal, tmp_path / "sub" / "local_profile.json")
    back = load_calibration(path)
    assert back.profile == prof and back.exchange_overhead_s == 0.0015 and back.notes == {"idle_gap_ms": 20.0}
    assert load_profile(path) == prof  # load_profile reads the record's "profile"
    assert get_profile("local", path) == prof
    assert get_profile("local", path, end="edge") == prof == back.for_end("ue")  # no fit per end: the shared one
    save_profile(prof, tmp_path / "plain.json")  # a plain profile file: no exchange overhead
    assert load_calibration(tmp_path / "plain.json").exchange_overhead_s == 0.0


def test_calibration_record_keeps_a_profile_per_end(tmp_path):
    fits = fit_ends(_two_ends())
    ends = {e: profile_from_fit(f, peak_tflops=0.1, role=e) for e, f in fits.items()}
    shared = profile_from_fit(fit_compute(_two_ends()), peak_tflops=0.1)
    path = save_calibration(Calibration(shared, ends=ends), tmp_path / "local_profile.json")
    back = load_calibration(path)
    assert back.ends == ends and back.for_end("ue") == ends["ue"] and back.profile == shared
    assert back.chunk_overhead_s == 0.0  # not measured
    chunked = save_calibration(Calibration(shared, chunk_overhead_s=3e-4, ue_chunk_overhead_s=1.2e-4,
                                           stream_start_overhead_s=0.03), tmp_path / "chunk.json")
    both = load_calibration(chunked)
    assert (both.chunk_overhead_s, both.ue_chunk_overhead_s, both.stream_start_overhead_s) == (3e-4, 1.2e-4, 0.03)
    for key in ("ue_chunk_overhead_s", "stream_start_overhead_s"):
        old = {k: v for k, v in json.loads(chunked.read_text()).items() if k != key}
        (tmp_path / "old.json").write_text(json.dumps(old))
        assert getattr(load_calibration(tmp_path / "old.json"), key) == 0.0  # a record from before: not measured
        bad = json.loads(chunked.read_text()) | {key: -1.0}
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=f"{key} must be finite"):
            load_calibration(tmp_path / "bad.json")
    assert get_profile("local", path, end="edge") == ends["edge"] != get_profile("local", path)
    assert load_profile(path, "ue").role == "ue"
    with pytest.raises(ValueError, match="end must be one of"):
        load_profile(path, "cloud")


def test_missing_local_profile_names_the_calibrate_command(tmp_path):
    with pytest.raises(ValueError, match="testbed.simulate calibrate --out .*nope.json"):
        get_profile("local", tmp_path / "nope.json")
    with pytest.raises(ValueError, match="local"):
        get_profile("tpu")


def test_profile_overheads_default_to_zero_and_are_validated():
    p = HardwareProfile("x", 1.0, 0.5, "t")
    assert p.call_overhead_s(1e6, 8) == 0.0
    q = HardwareProfile("x", 1.0, 0.5, "t", pass_overhead_s=1e-3, weight_read_s=1e-9, phase_overhead_s=5e-3)
    assert q.call_overhead_s(1e6, 8) == pytest.approx(5e-3 + 8 * (1e-3 + 1e-3))
    assert q.call_overhead_s(1e6, 0) == 0.0
    assert HardwareProfile.from_dict(q.to_dict()) == q
    with pytest.raises(ValueError, match="pass_overhead_s"):
        HardwareProfile("x", 1.0, 0.5, "t", pass_overhead_s=-1.0)
    with pytest.raises(ValueError, match="weight_read_s"):
        HardwareProfile("x", 1.0, 0.5, "t", weight_read_s=float("inf"))
    with pytest.raises(ValueError, match="phase_overhead_s"):
        HardwareProfile("x", 1.0, 0.5, "t", phase_overhead_s=-1e-3)
    with pytest.raises(ValueError, match="multirow_overhead_s"):
        HardwareProfile("x", 1.0, 0.5, "t", multirow_overhead_s=-1e-3)


def test_a_multi_row_call_pays_its_extra_cost_where_it_runs():
    """A verification (K + 1 rows) and a prefill of more than one token pay it; drafting and 1-row calls do not."""
    m = replace(PROF, multirow_overhead_s=2e-3)
    assert m.call_overhead_s(1e6, 1, 1) == pytest.approx(PROF.call_overhead_s(1e6, 1) + 2e-3)
    assert t_verify_s(DRAFTER, 3, 2, m) == pytest.approx(t_verify_s(DRAFTER, 3, 2, PROF) + 2e-3)
    assert t_prefill_s(DRAFTER, 2, m) == pytest.approx(t_prefill_s(DRAFTER, 2, PROF) + 2e-3)
    assert t_prefill_s(DRAFTER, 1, m) == t_prefill_s(DRAFTER, 1, PROF)
    assert t_draft_s(DRAFTER, 3, 4, m) == t_draft_s(DRAFTER, 3, 4, PROF)


def test_a_verification_pass_is_scaled_by_what_the_calibration_measured_for_its_k():
    """The edge's verify_scale, read from a record's medians by K: a pass of K drafted tokens costs the model's time
    times its factor, interpolated in log K between the measured K and the nearest past them; the UE, a 1-row
    drafting phase and a profile without the scale are unchanged."""
    from wisv.timing.hardware import verify_scale
    by_k = [{"role": "verify", "k": 1, "measured_ms": 50.0, "end_fit_ms": 62.5},
            {"role": "verify", "k": 4, "measured_ms": 120.0, "end_fit_ms": 80.0},
            {"role": "draft", "k": 4, "measured_ms": 40.0, "end_fit_ms": 20.0},
            {"role": "verify", "k": 16, "measured_ms": 100.0}]  # no end fit: left out
    assert verify_scale(by_k) == ((1, 0.8), (4, 1.5))
    m = replace(PROF, verify_scale=((1, 0.8), (4, 1.5)))
    assert [m.verify_factor(k) for k in (1, 2, 4, 64)] == pytest.approx([0.8, 1.15, 1.5, 1.5])
    assert t_verify_s(DRAFTER, 3, 2, m) == pytest.approx(1.15 * t_verify_s(DRAFTER, 3, 2, PROF))
    assert t_draft_s(DRAFTER, 3, 2, m) == t_draft_s(DRAFTER, 3, 2, PROF) and PROF.verify_factor(8) == 1.0
    assert HardwareProfile.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    for bad in (((4, 1.0), (1, 1.0)), ((0, 1.0),), ((2, 0.0),), ((2, float("nan")),)):
        with pytest.raises(ValueError, match="verify_scale"):
            replace(PROF, verify_scale=bad)
    with pytest.raises(ValueError, match="verify_scale"):
        HardwareProfile.from_dict(PROF.to_dict() | {"verify_scale": [[1]]})


def test_a_records_edge_profile_carries_its_verify_scale(tmp_path):
    """load_profile(path, "edge") derives the scale from the record's notes; the UE's and the shared profile do not,
    and an edge end that states its own keeps it."""
    doc = {"profile": PROF.to_dict(), "ends": {"ue": PROF.to_dict(), "edge": PROF.to_dict()},
           "notes": {"by_k": [{"role": "verify", "k": 2, "measured_ms": 30.0, "end_fit_ms": 20.0}]}}
    (tmp_path / "rec.json").write_text(json.dumps(doc))
    assert load_profile(tmp_path / "rec.json", "edge").verify_scale == ((2, 1.5),)
    assert load_profile(tmp_path / "rec.json", "ue").verify_scale == () == load_profile(tmp_path / "rec.json"
                                                                                        ).verify_scale
    doc["ends"]["edge"]["verify_scale"] = [[8, 1.25]]
    (tmp_path / "rec.json").write_text(json.dumps(doc))
    assert load_profile(tmp_path / "rec.json", "edge").verify_scale == ((8, 1.25),)


# f(l) = 32 l + 720 for this drafter (tests/wisv/timing/test_roundtime.py), so n_weights = 360
DRAFTER = ModelDims(n_layers=2, d_model=4, d_ff=8, vocab=10, n_heads=2, n_kv_heads=1)
PROF = HardwareProfile("p", peak_tflops=1e-6, eta=1.0, source="t", pass_overhead_s=1e-3, weight_read_s=1e-6,
                       phase_overhead_s=4e-3)


def test_round_model_charges_per_call_and_per_exchange_overheads():
    assert n_weights(DRAFTER) == 360
    flops = (816 + 848) / 1e6  # f_d(3) + f_d(4) at 1e6 FLOP/s
    assert t_draft_s(DRAFTER, 3, 2, PROF) == pytest.approx(flops + 4e-3 + 2 * (1e-3 + 360e-6))  # 1 phase, K = 2 calls
    verify = (848 + 880) / 1e6 + 4e-3 + (1e-3 + 360e-6)  # f(4) + f(5), one phase of one call
    assert t_verify_s(DRAFTER, 3, 2, PROF) == pytest.approx(verify)
    assert t_prefill_s(DRAFTER, 2, PROF) == pytest.approx((752 + 784) / 1e6 + 4e-3 + 1e-3 + 360e-6)  # f(1) + f(2)
    assert t_prefill_s(DRAFTER, 0, PROF) == 0.0
    pb = PayloadBits(b_tok=10, b_h=16, b_idx=4, d_d=4, vocab=10)
    csi = CSI.symmetric(1.0, 10.0)
    assert comm_s("sh", 2, 1, csi, pb, 0.002) - comm_s("sh", 2, 1, csi, pb) == pytest.approx(0.004)  # 2 exchanges
    assert comm_s("sh", 2, 0, csi, pb, 0.002) - comm_s("sh", 2, 0, csi, pb) == pytest.approx(0.002)
    assert comm_s("fh", 2, 1, csi, pb, 0.002) - comm_s("fh", 2, 1, csi, pb) == pytest.approx(0.002)
    dep = Deployment(DRAFTER, DRAFTER, PROF, PROF, pb, exchange_overhead_s=0.002)
    base = Deployment(DRAFTER, DRAFTER, PROF, PROF, pb)
    diff = round_times(RoundInputs("greedy", 2, 3), csi, dep).comm_s - round_times(RoundInputs("greedy", 2, 3), csi,
                                                                                     base).comm_s
    assert diff == pytest.approx(0.002)
