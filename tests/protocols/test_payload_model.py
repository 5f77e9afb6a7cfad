"""The cost model's wire packing (protocols.accounting.wire_payload_bits) against the messages sessions really send."""
from __future__ import annotations

import torch

from channel.csi import CSI
from protocols.accounting import message_bytes, wire_payload_bits
from protocols.edge_side import EdgeSession
from protocols.ue_side import UEParams, UESession
from protocols.wire import Limits, MsgType, decode, encode
from tests.tiny_pair import make_pair
from wisv.decoding.sessions import DraftSession, VerifySession
from wisv.decoding.speculative import RejectAll
from wisv.timing.latency import s_fh, s_greedy

VOCAB, EOS, K, D_D = 61, 60, 4, 32
LIMITS = Limits(vocab_size=VOCAB, max_draft_len=16, max_positions=16)
SLACK_BYTES = 8  # header ints take 1-3 bytes by value, session ids 1-64 chars: the model charges typical ones


def first_round(protocol: str):
    """(DRAFT, its reply) of one session's first round on the tiny pair."""
    torch.manual_seed(0)
    drafter, target = make_pair("llama", D_D, 2, 4, 2, vocab=VOCAB, eos=EOS)
    prompt = [3, 4, 5]
    params = UEParams(protocol=protocol, draft_len=K, max_new_tokens=12)
    ue = UESession("ue-0", DraftSession(drafter, prompt), params, EOS)
    edge = EdgeSession("ue-0", VerifySession(target, prompt), decode(encode(ue.open_message()), LIMITS), RejectAll(),
                       0.5, EOS)
    draft = ue.next_draft(CSI(20.0, 20.0, 20.0))
    return draft, edge.on_draft(decode(encode(draft), LIMITS))


def test_the_models_verdict_is_the_edges_verdict_and_its_draft_the_ues():
    pb = wire_payload_bits(D_D, VOCAB, K)
    for protocol, uplink in (("greedy", s_greedy), ("fh", s_fh)):
        draft, verdict = first_round(protocol)
        assert verdict.type == MsgType.VERDICT
        assert abs(message_bytes(verdict) - (pb.s_fb + pb.o_dn) / 8) <= SLACK_BYTES
        extra = 0 if protocol == "greedy" else 60  # fh: the hidden tensor's descriptor and frame header
        assert abs(message_bytes(draft) - uplink(K, pb) / 8) <= SLACK_BYTES + extra


def test_draft_features_are_counted_in_the_model_and_validated():
    import dataclasses

    import numpy as np
    import pytest

    from protocols.wire import WireError, make
    pb = wire_payload_bits(D_D, VOCAB, K, features=True)
    assert pb.b_feat == 48
    torch.manual_seed(0)
    drafter, target = make_pair("llama", D_D, 2, 4, 2, vocab=VOCAB, eos=EOS)
    params = UEParams(protocol="greedy", draft_len=K, max_new_tokens=12, features=True)
    ue = UESession("ue-0", DraftSession(drafter, [3, 4, 5]), params, EOS)
    draft = decode(encode(ue.next_draft(CSI(20.0, 20.0, 20.0))), LIMITS)
    f = draft.tensors["features"]
    assert f.shape == (K, 3) and f.dtype == np.float16 and ((0 <= f[:, 0]) & (f[:, 0] <= 1)).all()
    assert abs(message_bytes(draft) - s_greedy(K, pb) / 8) <= SLACK_BYTES
    tokens_only = dataclasses.replace(draft, tensors={"tokens": draft.tensors["tokens"]})
    assert message_bytes(draft) - message_bytes(tokens_only) >= K * 6  # 3 fp16 per token, plus its frame
    bad = f.copy()
    bad[1, 0] = 1.5  # a probability above 1
    for tensors, code in (({"features": bad}, "bad_features"), ({"features": f[:2]}, "shape_mismatch"),
                          ({"features": f.astype(np.float32)}, "bad_dtype"), ({"features": f[:, :2]}, "bad_shape")):
        msg = make(MsgType.DRAFT, "ue-0", {"tokens": draft.tensors["tokens"]} | tensors, round=0, t_draft_s=0.0)
        with pytest.raises(WireError) as e:
            decode(encode(msg), LIMITS)
        assert e.value.code == code, (code, e.value)


def test_target_features_in_the_verdict_are_what_the_model_charges():
    """Every VERDICT of a session granted target features weighs what the payload model predicts (chain and tree)."""
    import dataclasses

    from protocols.wire import Limits as L
    from wisv.timing.latency import down_s
    from wisv.timing.protodesc import describe, downlink_bits
    from wisv.timing.roundtime import comm_s
    limits = L(vocab_size=VOCAB, max_draft_len=16, max_positions=16)
    for rows in (1, 2):
        pb0, pb = wire_payload_bits(D_D, VOCAB, K), wire_payload_bits(D_D, VOCAB, K, target_features=rows, d_t=D_D)
        assert pb.tf_bits >= rows * D_D * 16 and pb.tf_bits - rows * D_D * 16 <= 40 * 8  # payload + descriptor, frame
        for protocol in ("greedy", "tree"):
            torch.manual_seed(0)
            drafter, target = make_pair("llama", D_D, 2, 4, 2, vocab=VOCAB, eos=EOS)
            params = UEParams(protocol=protocol, draft_len=K, tree_budget=K, max_new_tokens=40, target_features=rows)
            ue = UESession("ue-0", DraftSession(drafter, [3, 4, 5]), params, EOS)
            edge = EdgeSession("ue-0", VerifySession(target, [3, 4, 5]), decode(encode(ue.open_message()), limits),
                               RejectAll(), 0.5, EOS)
            d, plain = describe(protocol), edge.feature_rows
            assert plain == rows
            for _ in range(3):  # rounds: each VERDICT's bytes against the model's
                verdict = edge.on_draft(decode(encode(ue.next_draft(None)), limits))
                n = verdict.tensors["features"].shape[0]
                assert n == min(rows, verdict.header["n_accepted"] + 1)
                pbn = wire_payload_bits(D_D, VOCAB, K, target_features=n, d_t=D_D)
                bare = dataclasses.replace(verdict, tensors={k: v for k, v in verdict.tensors.items()
                                                             if k != "features"})
                assert message_bytes(verdict) - message_bytes(bare) == pbn.tf_bits / 8  # exactly what features add
                if not d.tree:  # a chain's whole VERDICT (a tree's path tensor is charged as K indices, no descriptor)
                    model = downlink_bits(d, K, pbn) / 8
                    assert abs(message_bytes(verdict) - model) <= SLACK_BYTES, (protocol, rows, message_bytes(verdict))
                ue.round.verdict = None
                committed = edge.verify.seq[len(ue.d.seq):]
                ue.d.commit(committed)
                ue.n_rounds += 1
                if edge.done:
                    break
        csi = CSI(2.0, 2.0, 20.0)
        extra = comm_s("greedy", K, 0, csi, pb) - comm_s("greedy", K, 0, csi, pb0)
        assert abs(extra - down_s(pb.tf_bits, csi)) < 1e-12 and extra > 0
