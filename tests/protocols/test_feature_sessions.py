"""Every protocol drafts with the feature head over the wire format, fed by the VERDICT's target features."""
from __future__ import annotations

import pytest
import torch

from protocols.edge_side import EdgeSession
from protocols.typed import OpenOk
from protocols.ue_side import UEParams, UESession
from tests.protocols.test_sessions import EOS, MAX_NEW, K, drive, reference, wire
from tests.tiny_pair import make_pair
from wisv.decoding.featdraft import FeatureDraftSession, FeatureHead
from wisv.decoding.sessions import VerifySession
from wisv.decoding.speculative import RejectAll

PROMPT = [3, 4, 5]


@pytest.fixture(scope="module")
def pair():
    torch.set_num_threads(1)
    return make_pair("llama", 32, 2, 4, 2, vocab=61, eos=EOS)


def open_feature_pair(pair, **params) -> tuple[EdgeSession, UESession]:
    drafter, target = pair
    torch.manual_seed(2)
    head = FeatureHead.from_target(target, window=16).eval()
    d = FeatureDraftSession(drafter, PROMPT, head)
    ue = UESession("ue-0", d, UEParams(**{"draft_len": K, "max_new_tokens": MAX_NEW, "tree_budget": K,
                                          "target_features": d.reads_features} | params), EOS)
    edge = EdgeSession("ue-0", VerifySession(target, PROMPT), wire(ue.open_message()), RejectAll(), 0.5, EOS)
    ok = OpenOk(target_hidden=int(target.config.hidden_size), vocab_size=int(target.config.vocab_size),
                **edge.open_ok_fields())
    ue.check_open_ok(ok)
    return edge, ue, head


@pytest.mark.parametrize("protocol", ["greedy", "ef", "fh", "sh", "tree", "auto"])
def test_every_protocol_with_the_feature_head_gives_the_target_s_output(pair, protocol):
    edge, ue, head = open_feature_pair(pair, protocol=protocol, auto_rule="rtt")
    assert ue.open_message().header["drafter_hidden"] == head.cfg.d_t  # its hidden states: predicted features
    logs = drive(edge, ue)
    assert ue.tokens == reference(pair, PROMPT).tokens  # RejectAll: every protocol is greedy-equivalent
    for log in logs:
        if "hidden" in log.draft.tensors:  # fh uploads the head's predicted features
            assert log.draft.tensors["hidden"].shape == (len(log.draft.tensors["tokens"]), head.cfg.d_t)
    if protocol in ("greedy", "ef", "fh", "sh"):  # chains: the same rounds as the in-process loop with the head
        drafter, _ = pair
        local = reference(pair, PROMPT, make_draft=lambda s: FeatureDraftSession(drafter, s, head))
        assert [log.verdict["n_accepted"] for log in logs] == [r.accepted for r in local.rounds]
