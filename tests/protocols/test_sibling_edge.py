"""The edge's sibling option (EdgeSession.sibling): a WISV round computes the sib_* edge features with one more small
pass, on a VerifySession and on the batching engine, and commits the same tokens as without it."""
from __future__ import annotations

import pytest
import torch

from protocols.edge_side import EdgeSession
from protocols.rounds import UEParams
from protocols.ue_side import UESession
from tests.protocols.test_sessions import EOS, MAX_NEW, PROMPTS, K, drive, wire
from tests.tiny_pair import make_pair
from wisv.decoding.sessions import DraftSession, VerifySession
from wisv.head.features import BASE_SCALARS, SIBLING_SCALARS, EdgeFeatures
from wisv.head.judges import JudgeConfig, JudgePolicy
from wisv.serving.batchverify import BatchVerifier
from wisv.serving.engine import EngineView


class Recording(JudgePolicy):
    """The nll-margin judge, keeping the edge features of every round it decides."""

    def __init__(self):
        super().__init__(JudgeConfig("nll-margin", "nll-margin", ("edge",), (len(BASE_SCALARS),), tau=0.9))
        self.seen: list[EdgeFeatures] = []

    def reject_probs(self, h_draft, h_target, positions, csi=None, edge=None):
        self.seen.append(edge)
        return super().reject_probs(h_draft, h_target, positions, csi, edge)


@pytest.fixture(scope="module")
def pair():
    torch.set_num_threads(1)
    return make_pair("llama", 32, 2, 4, 2, vocab=61, eos=EOS)


def run(pair, prompt, sibling: bool, engine: bool) -> tuple[list[int], Recording]:
    drafter, target = pair
    ue = UESession("ue-0", DraftSession(drafter, prompt), UEParams(protocol="ef", draft_len=K, max_new_tokens=MAX_NEW),
                   EOS)
    verify = EngineView(BatchVerifier(target), "ue-0", prompt) if engine else VerifySession(target, prompt)
    policy = Recording()
    edge = EdgeSession("ue-0", verify, wire(ue.open_message()), policy, 0.5, EOS)
    edge.sibling = sibling
    drive(edge, ue)
    return ue.tokens, policy


@pytest.mark.slow
@pytest.mark.parametrize("engine", [False, True], ids=["session", "engine"])
def test_sibling_fills_the_sib_columns_and_commits_the_same_tokens(pair, engine):
    for prompt in PROMPTS:
        off_tokens, off = run(pair, prompt, False, engine)
        on_tokens, on = run(pair, prompt, True, engine)
        assert on_tokens == off_tokens
        assert len(on.seen) == len(off.seen) > 0
        n, sib = len(BASE_SCALARS), slice(len(BASE_SCALARS), len(BASE_SCALARS) + len(SIBLING_SCALARS))
        for a, b in zip(off.seen, on.seen):
            torch.testing.assert_close(b.scalars[:, :n], a.scalars[:, :n], rtol=1e-5, atol=1e-5)
            assert a.scalars[:, sib].isnan().all() and not b.scalars[:, sib].isnan().any()
            assert torch.equal(b.scalars[:, -1], a.scalars[:, -1])  # out_pos
