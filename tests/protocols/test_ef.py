"""The ef protocol: WISV acceptance on a head of edge features, at greedy's uplink (no hidden states)."""
from __future__ import annotations

import pytest
import torch

from channel.csi import CSI
from protocols.auto import MismatchStats, choose
from protocols.edge_side import ProtocolError
from protocols.registry import get_protocol, servable
from protocols.schema import OpenOk
from protocols.wire import MsgType, encode, make
from tests.protocols.test_sessions import EOS, PROMPTS, K, drive, open_pair, reference, wire
from tests.tiny_pair import make_pair
from wisv.head.features import SCALARS
from wisv.head.judges import JudgeConfig, JudgePolicy
from wisv.head.model import DecisionHead, HeadConfig, HeadPolicy
from wisv.timing.latency import PayloadBits

NLL_MARGIN = JudgePolicy(JudgeConfig("nll-margin", "nll-margin", ("edge",), (len(SCALARS),), tau=0.9))


@pytest.fixture(scope="module")
def pair():
    torch.set_num_threads(1)
    return make_pair("llama", 32, 2, 4, 2, vocab=61, eos=EOS)


@pytest.mark.parametrize("prompt", PROMPTS, ids=["p3", "p6"])
def test_ef_uplink_is_greedys_for_the_same_drafts(pair, prompt):
    edge, ue = open_pair(pair, prompt, policy=NLL_MARGIN, protocol="ef")
    logs = drive(edge, ue)
    for log in logs:
        d = log.draft
        assert set(d.tensors) == {"tokens"} and log.query is None
        as_greedy = make(MsgType.DRAFT, d.session, dict(d.tensors), **(d.header | {"protocol": "greedy"}))
        ef_bytes, greedy_bytes = (sum(map(len, encode(m))) for m in (d, as_greedy))
        assert ef_bytes == greedy_bytes - (len("greedy") - len("ef"))  # only the protocol's name differs
    assert get_protocol("ef").uplink(ue.round.draft).keys() == get_protocol("greedy").uplink(ue.round.draft).keys()


def test_ef_decides_as_the_in_process_loop_with_the_same_judge(pair):
    prompt = PROMPTS[1]
    edge, ue = open_pair(pair, prompt, policy=NLL_MARGIN, protocol="ef")
    logs = drive(edge, ue)
    ref = reference(pair, prompt, rule="wisv", policy=NLL_MARGIN, tau=0.5)  # open_pair's edge runs at tau 0.5
    assert ue.tokens == ref.tokens
    kept = sum(j < r.accepted for r in ref.rounds for j in r.mismatches)  # mismatches the judge accepted
    assert kept > 0 and ref.tokens != reference(pair, prompt).tokens  # the judge did decide something
    assert len(logs) == len(ref.rounds)


def test_auto_serves_ef_for_an_edge_head_and_fh_or_sh_for_a_hidden_head(pair):
    pb = PayloadBits.paper(vocab=61, d_d=32)
    csi, stats = CSI.symmetric(3, 45), MismatchStats()
    assert choose("cost", csi, K, stats, pb, servable(False)) == "ef"
    assert choose("rtt", csi, K, stats, pb, servable(True)) == "fh"
    edge, ue = open_pair(pair, PROMPTS[0], policy=NLL_MARGIN, protocol="auto")
    ue.check_open_ok(OpenOk(target_hidden=32, vocab_size=61, edge={"uploads_hidden": False}))
    logs = drive(edge, ue, csi=lambda i: csi)
    assert {log.draft.header["protocol"] for log in logs} == {"ef"}


def test_ef_is_refused_at_open_for_a_head_that_reads_drafter_hidden_states(pair):
    head = HeadPolicy(DecisionHead(HeadConfig(d_draft=32, d_target=32)))
    with pytest.raises(ProtocolError, match="reads the drafter's hidden states"):
        open_pair(pair, PROMPTS[0], policy=head, protocol="ef")
    edge, ue = open_pair(pair, PROMPTS[0], policy=NLL_MARGIN, protocol="ef")
    bad = ue.next_draft(None)
    bad.tensors["hidden"] = torch.zeros(len(bad.tensors["tokens"]), 32).numpy()
    with pytest.raises(ProtocolError, match="token ids only"):
        edge.on_draft(wire(bad))
