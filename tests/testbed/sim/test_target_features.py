"""The simulator charges the feature drafter's downlink: target-feature rows of the target's width per VERDICT."""
from __future__ import annotations

from dataclasses import replace

import pytest

from channel.csi import CSI
from testbed.sim.cli import SimConfig
from testbed.sim.resolve import Head, PairCache, deployment
from wisv.timing.latency import down_s
from wisv.timing.roundtime import comm_s


@pytest.mark.parametrize("payload", ["paper", "wire"])
def test_target_feature_rows_cost_their_bits_on_the_downlink(payload):
    cfg = SimConfig(arch_drafter="llama-3.2-1b", arch_target="llama-3.1-8b", payload=payload, exchange_overhead_ms=0.0)
    head = Head(None, 0.5, "", "none")
    plain, _ = deployment(cfg, PairCache(None, None), head)
    fed, resolved = deployment(replace(cfg, target_features=2), PairCache(None, None), head)
    assert plain.payload.tf_bits == 0 and resolved["payload"]["tf_bits"] == fed.payload.tf_bits
    payload_bits = 2 * 4096 * 16  # two rows of the 8B target's width, fp16
    assert payload_bits <= fed.payload.tf_bits <= payload_bits + (64 * 8 if payload == "wire" else 0)
    csi = CSI(3.0, 3.0, 45.0)
    for protocol in ("greedy", "ef", "tree"):
        extra = comm_s(protocol, 8, 0, csi, fed.payload) - comm_s(protocol, 8, 0, csi, plain.payload)
        assert extra == pytest.approx(down_s(fed.payload.tf_bits, csi)) and extra > 0.02  # ~44 ms at 3 Mbit/s
