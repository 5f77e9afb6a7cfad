"""A protocol's description: the payload model it implies equals the paper's formulas bit for bit, the latency model
prices a round by it alone, and the registry's lists derive from it."""
from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from channel.csi import CSI
from wisv.timing import protodesc
from wisv.timing.latency import (
    PayloadBits,
    s_fh,
    s_greedy,
    s_reject,
    s_sh1,
    s_tree,
    s_tree_fb,
    t_fh,
    t_sh,
    t_single_exchange,
)
from wisv.timing.protodesc import DESCRIPTIONS, ProtocolDesc, describe, downlink_bits, exchanges, uplink_bits
from wisv.timing.roundtime import comm_s, n_exchanges

PACKINGS = [PayloadBits.paper(vocab=128256, d_d=2048), PayloadBits.paper(vocab=61, d_d=32, o_up=80, o_dn=40),
            PayloadBits(b_tok=32, b_h=16, b_idx=32, d_d=896, vocab=151936, o_up=1816, o_dn=1392, b_feat=48),
            PayloadBits(b_tok=10, b_h=16, b_idx=4, d_d=4, vocab=10, o_up=80, o_dn=40)]
UPLINK = {"greedy": s_greedy, "ef": s_greedy, "sh": s_sh1, "fh": s_fh, "auto": s_fh, "reject": s_reject,
          "tree": s_tree}  # the paper's formula of each built-in's DRAFT
CHAIN_FB = lambda k, pb: pb.s_fb + pb.o_dn  # noqa: E731 - eq. 4 plus the downlink overhead


@pytest.mark.parametrize("pb", PACKINGS)
@pytest.mark.parametrize("name", list(UPLINK))
def test_the_described_payloads_equal_the_formulas_exactly(name: str, pb: PayloadBits) -> None:
    d = describe(name)
    for k in (1, 2, 8, 31):
        assert uplink_bits(d, k, pb) == UPLINK[name](k, pb)
        assert downlink_bits(d, k, pb) == (s_tree_fb if d.tree else CHAIN_FB)(k, pb)


@pytest.mark.parametrize("m", [0, 1, 2.5])
def test_the_round_link_time_is_the_formulas_by_description(m: float) -> None:
    """comm_s reads the description alone: the same seconds as eqs. 6 and 10 and the single exchanges."""
    pb, csi = PACKINGS[2], CSI(rate_up_mbps=3.0, rate_down_mbps=7.0, rtt_ms=12.5, per_up=0.05, per_down=0.01)
    k, fixed = 8, 0.002
    one = lambda up, down: t_single_exchange(up, down, csi) + fixed  # noqa: E731
    want = {"greedy": one(s_greedy(k, pb), CHAIN_FB(k, pb)), "ef": one(s_greedy(k, pb), CHAIN_FB(k, pb)),
            "reject": one(s_reject(k, pb), CHAIN_FB(k, pb)), "tree": one(s_tree(k, pb), s_tree_fb(k, pb)),
            "fh": t_fh(k, csi, pb) + fixed, "sh": t_sh(k, m, csi, pb) + (2 if m else 1) * fixed}
    assert {n: comm_s(n, k, m, csi, pb, fixed) for n in want} == want
    assert [n_exchanges(n, m) for n in want] == [1, 1, 1, 1, 1, 2 if m else 1]
    with pytest.raises(ValueError, match="unknown protocol 'auto'"):
        comm_s("auto", k, m, csi, pb)  # a chooser never runs a round of its own


def test_the_descriptions_of_the_built_ins() -> None:
    assert tuple(DESCRIPTIONS) == ("greedy", "reject", "fh", "sh", "ef", "auto", "tree", "server", "device")
    assert [(n, d.generates) for n, d in DESCRIPTIONS.items() if not d.speculative] == [("server", "target"),
                                                                                      ("device", "drafter")]
    assert [n for n, d in DESCRIPTIONS.items() if not d.edge_rounds] == ["device"]
    assert [n for n, d in DESCRIPTIONS.items() if d.lossless] == ["greedy", "tree", "server"]
    assert [n for n, d in DESCRIPTIONS.items() if d.head] == ["fh", "sh", "ef", "auto"]
    assert [n for n, d in DESCRIPTIONS.items() if d.uploads_hidden] == ["fh", "sh", "auto"]
    assert [n for n, d in DESCRIPTIONS.items() if d.hidden_query] == ["sh"]
    assert [n for n, d in DESCRIPTIONS.items() if d.tree or d.engine] == ["tree"]
    assert describe("auto").priced_as == "fh"
    assert protodesc.round_names() == ("greedy", "reject", "fh", "sh", "ef", "tree")
    assert protodesc.servable(True) == ("fh", "sh") and protodesc.servable(False) == ("ef",)
    assert not describe("ef").serves(("edge", "h_draft")) and describe("ef").serves(("edge", "h_target", "csi"))
    assert describe("fh").serves(("h_draft", "h_target", "csi")) and describe("greedy").serves(("h_draft",))


@pytest.mark.parametrize("bad", [dict(rule="topk"), dict(uplink=("hidden",)), dict(uplink=("ids", "logits")),
                                 dict(tree=True), dict(uplink=("ids", "parents")), dict(chooses=True),
                                 dict(engine=("paging",)), dict(generates="edge"), dict(generates="target"),
                                 dict(generates="drafter", uplink=(), hidden_query=True),
                                 dict(generates="target", uplink=(), rule="wisv"),
                                 dict(generates="target", uplink=(), head_inputs=("edge",)),
                                 dict(generates="drafter", uplink=(), samples=True), dict(uplink=())])
def test_a_bad_description_is_refused_naming_the_protocol(bad: dict) -> None:
    with pytest.raises(ValueError, match="protocol 'x'"):
        ProtocolDesc(**{"name": "x", "rule": "greedy"} | bad)


def test_a_new_description_is_priced_by_the_latency_model_without_a_line_of_it_changed() -> None:
    """Adding a protocol is its description: the time model and the payload model price it at once."""
    d = ProtocolDesc(name="fh-probs", rule="wisv", uplink=("ids", "features", "hidden", "probs"),
                     head_inputs=("h_draft",))
    pb, csi = PACKINGS[3], CSI(rate_up_mbps=1.0, rate_down_mbps=2.0, rtt_ms=10.0)
    try:
        assert protodesc.register(d) is d and protodesc.register(d) is d  # the same description twice: one entry
        with pytest.raises(ValueError, match="already described"):
            protodesc.register(ProtocolDesc(name="fh-probs", rule="greedy"))
        assert comm_s("fh-probs", 2, 1, csi, pb) == t_single_exchange(s_fh(2, pb) + 2 * 10 * 16, CHAIN_FB(2, pb), csi)
        assert exchanges(d, 1) == 1 and "fh-probs" in protodesc.servable(True)
    finally:
        DESCRIPTIONS.pop("fh-probs", None)
    with pytest.raises(ValueError, match="unknown protocol 'fh-probs'"):
        describe("fh-probs")


def test_the_descriptions_import_without_torch() -> None:
    """Plain data: the module itself imports neither numpy nor torch (numpy comes with channel.csi, below it)."""
    code = "import sys, wisv.timing.protodesc as p; assert p.DESCRIPTIONS; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    tree = ast.parse(open(protodesc.__file__).read())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported == {"__future__", "dataclasses", "wisv", "wisv.timing.latency"}  # wisv: its plugins loader
    assert [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "wisv"
            for a in n.names] == ["plugins"]


@pytest.mark.parametrize("pb", PACKINGS)
def test_the_baselines_that_generate_alone_carry_what_their_rounds_carry(pb: PayloadBits) -> None:
    """Server-only: a request of no position up (its overhead), a chunk of k token ids down, one exchange; on-device:
    nothing on the link.  Neither is a round the latency model prices (no DRAFT names it)."""
    server, device = describe("server"), describe("device")
    for k in (1, 4, 16):
        assert (uplink_bits(server, k, pb), downlink_bits(server, k, pb)) == (pb.o_up, k * pb.b_tok + pb.o_dn)
        assert (uplink_bits(device, k, pb), downlink_bits(device, k, pb)) == (0.0, 0.0)
    assert (exchanges(server, 0), exchanges(device, 0)) == (1, 0)
    assert not {"server", "device"} & set(protodesc.round_names())
    with pytest.raises(ValueError, match="unknown protocol 'server'"):
        comm_s("server", 4, 0, CSI(rate_up_mbps=3.0, rate_down_mbps=7.0, rtt_ms=12.5), pb)
