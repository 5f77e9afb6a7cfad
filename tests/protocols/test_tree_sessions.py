"""The tree protocol's UE and edge state machines driven message by message: lossless, the VERDICT path, proactive
tree expansion reused on complete alignment, bad trees refused, and trees on the batching engine."""
from __future__ import annotations

import numpy as np
import pytest

from protocols.edge_side import EdgeSession, ProtocolError
from protocols.ue_side import EdgeError
from tests.protocols.test_sessions import EOS, MAX_NEW, PROMPTS, open_pair, pair, wire  # noqa: F401 (fixture)
from wisv.decoding.speculative import RejectAll
from wisv.tasks.evaluate import greedy_reference


def run_tree(edge, ue, proactive: bool) -> list[dict]:
    rows = []
    while not ue.done:
        draft = wire(ue.next_draft(None))
        n_pro = ue.draft_proactively(lambda: False) if proactive else 0
        verdict = wire(edge.on_draft(draft))
        assert ue.on_reply(verdict) is None
        r = ue.round
        rows.append({"size": len(draft.tensors["tokens"]), "path": verdict.tensors["path"].tolist(),
                     "n_pro": n_pro, "reused": r.reused, "parents": draft.tensors["parents"].tolist()})
    assert edge.done and edge.generated == len(ue.tokens)
    return rows


@pytest.mark.parametrize("budget,proactive", [(1, 0), (6, 0), (16, 0), (8, 4)])
def test_tree_protocol_is_lossless(pair, budget, proactive):
    _, target = pair
    for prompt in PROMPTS:
        edge, ue = open_pair(pair, prompt, protocol="tree", tree_budget=budget, proactive=proactive)
        rows = run_tree(edge, ue, proactive > 0)
        assert ue.tokens == greedy_reference(target, prompt, max_new_tokens=MAX_NEW)
        assert all(r["size"] <= budget + proactive for r in rows)
        for r in rows:  # the path is a root path of the tree sent
            assert all(r["parents"][b] == a for a, b in zip([-1] + r["path"], r["path"]))
        if proactive:
            assert all(r["n_pro"] == proactive for r in rows)
    assert edge.draft_len == budget + proactive


def test_proactive_expansion_is_reused_on_complete_alignment(pair):
    _, target = pair
    reused = 0
    for prompt in PROMPTS + [[1, 2], [30, 31, 32, 33]]:
        edge, ue = open_pair(pair, prompt, protocol="tree", tree_budget=4, proactive=6)
        rows = run_tree(edge, ue, True)
        assert ue.tokens == greedy_reference(target, prompt, max_new_tokens=MAX_NEW)
        reused += sum(r["reused"] for r in rows)
        for prev, cur in zip(rows, rows[1:]):  # a carried chain opens the next tree as a line
            assert cur["parents"][: prev["reused"]] == list(range(-1, prev["reused"] - 1))
    assert reused > 0


def test_edge_refuses_a_tree_draft_without_parents_and_a_chain_with_them(pair):
    edge, ue = open_pair(pair, PROMPTS[0], protocol="tree", tree_budget=4)
    msg = wire(ue.next_draft(None))
    del msg.tensors["parents"]
    with pytest.raises(ProtocolError, match="parents"):
        edge.on_draft(msg)
    edge, ue = open_pair(pair, PROMPTS[0], protocol="greedy")
    msg = wire(ue.next_draft(None))
    msg.tensors["parents"] = np.full(len(msg.tensors["tokens"]), -1, np.int32)
    with pytest.raises(ProtocolError, match="parents"):
        edge.on_draft(msg)


def test_ue_refuses_a_verdict_path_outside_its_tree(pair):
    edge, ue = open_pair(pair, PROMPTS[0], protocol="tree", tree_budget=4)
    verdict = wire(edge.on_draft(wire(ue.next_draft(None))))
    parents = ue.round.tree.tree.parents
    bad = next(i for i in range(len(parents)) if parents[i] != -1) if any(p != -1 for p in parents) else 0
    verdict.tensors["path"] = np.asarray([bad], np.int32) if parents[bad] != -1 else np.asarray([0, 0], np.int32)
    verdict.header["n_accepted"] = len(verdict.tensors["path"])
    with pytest.raises(EdgeError, match="path"):
        ue.on_reply(verdict)


def test_an_engine_without_trees_refuses_tree_sessions_naming_itself(pair):
    class Chains:  # a verifier that takes no trees (as the vllm engine's EngineView)
        takes_trees = False
        tree_refusal = "the vllm engine (--engine vllm) verifies chains only"
    _, ue = open_pair(pair, PROMPTS[0], protocol="tree")
    with pytest.raises(ProtocolError, match="vllm"):
        EdgeSession("ue-0", Chains(), wire(ue.open_message()), RejectAll(), 0.5, EOS)


@pytest.mark.parametrize("kv_reuse", [True, False])
def test_a_batching_edge_serves_tree_sessions_losslessly(pair, kv_reuse):
    from wisv.serving.batchverify import BatchVerifier, EngineConfig
    from wisv.serving.engine import EngineView
    _, target = pair
    engine = BatchVerifier(target, EngineConfig(kv_reuse=kv_reuse))
    for i, prompt in enumerate(PROMPTS):
        _, ue = open_pair(pair, prompt, protocol="tree", tree_budget=6, proactive=2)
        edge = EdgeSession(f"ue-{i}", EngineView(engine, f"ue-{i}", prompt), wire(ue.open_message()), RejectAll(),
                           0.5, EOS)
        run_tree(edge, ue, True)
        assert ue.tokens == greedy_reference(target, prompt, max_new_tokens=MAX_NEW)


def test_a_tree_and_a_chain_in_one_engine_call_match_the_lone_sessions(pair):
    import torch

    from wisv.decoding.sessions import VerifySession
    from wisv.serving.batchverify import BatchVerifier
    from wisv.serving.engine import VerifyRequest
    _, target = pair
    engine = BatchVerifier(target)
    chain, tree, parents = [5, 6, 7], [8, 9, 10, 11], [-1, 0, 0, 1]
    for sid, prompt in (("c", PROMPTS[0]), ("t", PROMPTS[1])):
        engine.open(sid, prompt)
    blocks = engine.verify([VerifyRequest("c", chain), VerifyRequest("t", tree, parents)])
    alone_c, alone_t = VerifySession(target, PROMPTS[0]).verify(chain), VerifySession(target, PROMPTS[1])
    alone_t = alone_t.verify_tree(tree, parents)
    torch.testing.assert_close(blocks["c"].logits, alone_c.logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(blocks["t"].logits, alone_t.logits, atol=1e-4, rtol=1e-4)
    assert engine.commit_path("t", [0, 2], 12) == [8, 10, 12]
    assert engine.sessions["t"].seq == list(PROMPTS[1]) + [8, 10, 12]
    assert engine.sessions["t"].cached_len == len(PROMPTS[1]) + 2  # prefix, root and the path: seq[:-1]
    engine.verify([VerifyRequest("t", tree, parents)])
    with pytest.raises(ValueError, match="path"):
        engine.commit_path("t", [7], 1)


def test_tree_budget_auto_is_lossless_and_learns(pair):
    from wisv.timing.window import AUTO_DRAFT_LEN, TreeWindowTracker
    _, target = pair
    edge, ue = open_pair(pair, PROMPTS[1], protocol="tree", tree_budget=AUTO_DRAFT_LEN, draft_len_max=12)
    assert isinstance(ue.window, TreeWindowTracker) and edge.draft_len == 12  # OPEN declares the largest tree
    rows = run_tree(edge, ue, False)
    assert ue.tokens == greedy_reference(target, PROMPTS[1], max_new_tokens=MAX_NEW)
    assert rows[0]["size"] == 12 and all(1 <= r["size"] <= 12 for r in rows)  # min(16, cap), then chosen
    assert ue.window.tau_d_s is not None and 0 < ue.window.depth_per_token <= 1


def test_tree_window_tracker_by_hand():
    from wisv.timing.window import TreeWindowTracker
    w = TreeWindowTracker(1, 32)
    w.update_tree(16, 8, 8, t_draft_s=0.032, t_verify_s=0.010)  # a chain-like tree, all accepted
    assert w.depth_per_token == pytest.approx(0.5) and w.tau_d_s == pytest.approx(0.002)
    assert len(w.levels(16)) == 8 and w.levels(16)[0] == pytest.approx(w.history.alpha)
    fast = w.choose(lambda n: 0.050 + 0.002 * n).k  # a long fixed cost per round: a large tree
    slow = w.choose(lambda n: 0.001 + 0.002 * n).k  # almost none: a small one
    assert fast > slow
    with pytest.raises(ValueError):
        w.update_tree(4, 5, 1)
