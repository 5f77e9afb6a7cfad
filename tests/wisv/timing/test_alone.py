"""The latency model of a model generating alone (wisv.timing.alone): server-only's stream and on-device."""
from __future__ import annotations

from dataclasses import replace

import pytest

from channel.csi import CSI
from wisv.timing.alone import alone_s, decode_steps_s, device_s, open_exchange_s, stream_s
from wisv.timing.latency import down_s, up_s
from wisv.timing.protodesc import alone_names, describe, downlink_bits, round_names, uplink_bits
from wisv.timing.roundtime import Deployment, t_prefill_s

DEP = Deployment.paper_llama()
SERVER, DEVICE = (describe(n) for n in alone_names())
FIXED = CSI.symmetric(20.0, 20.0)


def test_alone_names_are_the_non_speculative_descriptions():
    assert [describe(n).generates for n in alone_names()] == ["target", "drafter"]
    assert not set(alone_names()) & set(round_names())


def test_stream_is_open_generate_decode_and_the_last_chunk_on_the_link():
    """Compute-bound stream: OPEN + GENERATE up + RTT/2 + every decode step + the last chunk + RTT/2."""
    n, p = 40, 30
    steps = decode_steps_s(DEP.target, p - 1, n, DEP.edge, DEP)
    pb = DEP.payload
    want = (open_exchange_s(p, FIXED, DEP) + up_s(uplink_bits(SERVER, 0, pb), FIXED) + 0.010 + sum(steps)
            + down_s(downlink_bits(SERVER, 1, pb), FIXED) + 0.010)
    assert stream_s(SERVER, p, n, lambda _t: FIXED, DEP) == pytest.approx(want)
    assert alone_s(SERVER, p, n, lambda _t: FIXED, DEP) == pytest.approx(want)


def test_each_chunk_costs_the_edge_its_host_time():
    """The calibrated host time per chunk delays every later pass: n chunks of 1 token, n times it; 4 of 10, 4 times."""
    n, p, host = 40, 30, 0.0003
    base = stream_s(SERVER, p, n, lambda _t: FIXED, DEP)
    dep = replace(DEP, chunk_overhead_s=host)
    assert stream_s(SERVER, p, n, lambda _t: FIXED, dep) == pytest.approx(base + n * host)
    four = stream_s(SERVER, p, n, lambda _t: FIXED, DEP, chunk_tokens=10)
    assert stream_s(SERVER, p, n, lambda _t: FIXED, dep, chunk_tokens=10) == pytest.approx(four + 4 * host)
    assert device_s(p, n, dep) == device_s(p, n, DEP)  # nothing streams on the device


def test_a_streams_start_costs_once_and_only_on_the_edge():
    """The calibrated start overhead delays the whole stream once (its first chunk and so every later one), however
    many chunks it sends; on-device does not pay it."""
    n, p, start = 40, 30, 0.030
    dep = replace(DEP, stream_start_overhead_s=start)
    for chunk in (1, 10):
        assert stream_s(SERVER, p, n, lambda _t: FIXED, dep, chunk) == pytest.approx(
            stream_s(SERVER, p, n, lambda _t: FIXED, DEP, chunk) + start)
    assert stream_s(SERVER, p, 1, lambda _t: FIXED, dep) == pytest.approx(stream_s(SERVER, p, 1, lambda _t: FIXED,
                                                                                   DEP) + start)
    assert device_s(p, n, dep) == device_s(p, n, DEP)


def test_a_slow_downlink_queues_the_chunks():
    """When a chunk takes longer on the wire than a decode step, the link is the bottleneck: n chunks' serialization."""
    slow = CSI.symmetric(0.002, 20.0)
    n, p = 50, 30
    per_chunk = down_s(downlink_bits(SERVER, 1, DEP.payload), slow)
    assert per_chunk > max(decode_steps_s(DEP.target, p - 1, n, DEP.edge, DEP))
    t = stream_s(SERVER, p, n, lambda _t: slow, DEP)
    assert t >= n * per_chunk + 0.010
    assert t == pytest.approx(n * per_chunk + stream_s(SERVER, p, 0, lambda _t: slow, DEP) + 0.010, rel=0.05)


def test_bigger_chunks_save_the_per_chunk_overhead_when_the_link_binds():
    dep = replace(DEP, payload=replace(DEP.payload, o_dn=20_000.0))  # 20 kbit of framing per chunk
    slow = CSI.symmetric(0.5, 20.0)
    per_token = stream_s(SERVER, 30, 64, lambda _t: slow, dep)
    assert stream_s(SERVER, 30, 64, lambda _t: slow, dep, chunk_tokens=16) < per_token - 60 * 0.04 + 0.1


def test_stream_grows_with_rtt_by_one_and_a_half_rtts():
    """OPEN's RTT, GENERATE's half and the last chunk's half: two RTTs in all."""
    a = stream_s(SERVER, 30, 20, lambda _t: CSI.symmetric(20.0, 10.0), DEP)
    b = stream_s(SERVER, 30, 20, lambda _t: CSI.symmetric(20.0, 60.0), DEP)
    assert b - a == pytest.approx(2 * 0.050)


def test_device_is_prefill_and_decode_on_the_ue_with_no_link():
    n, p = 25, 12
    want = t_prefill_s(DEP.drafter, p - 1, DEP.ue) + sum(decode_steps_s(DEP.drafter, p - 1, n, DEP.ue, DEP))
    assert device_s(p, n, DEP) == pytest.approx(want)
    assert alone_s(DEVICE, p, n, lambda _t: CSI.symmetric(0.01, 900.0), DEP) == pytest.approx(want)


def test_device_pays_the_ues_host_time_per_chunk():
    """On-device: each chunk the UE generates costs its host ``ue_chunk_overhead_s`` (its loop and record)."""
    n, p = 25, 12
    dep = replace(DEP, ue_chunk_overhead_s=0.001)
    assert device_s(p, n, dep) == pytest.approx(device_s(p, n, DEP) + 25 * 0.001)  # a chunk per token
    assert device_s(p, n, dep, chunk_tokens=4) == pytest.approx(device_s(p, n, DEP) + 7 * 0.001)  # ceil(25 / 4)
    assert stream_s(SERVER, p, n, lambda _t: CSI.symmetric(20.0, 10.0), dep) == stream_s(
        SERVER, p, n, lambda _t: CSI.symmetric(20.0, 10.0), DEP)  # the edge's stream pays its own


def test_decode_steps_pay_the_phase_cost_once():
    prof = replace(DEP.edge, phase_overhead_s=0.5, pass_overhead_s=0.01)
    steps = decode_steps_s(DEP.target, 10, 3, prof, DEP)
    assert steps[0] - steps[1] == pytest.approx(0.5, rel=1e-3)
    assert steps[1] - steps[2] == pytest.approx(0.0, abs=1e-6)


def test_a_speculative_description_is_refused():
    with pytest.raises(ValueError, match="drafts"):
        alone_s(describe("greedy"), 10, 5, lambda _t: FIXED, DEP)
