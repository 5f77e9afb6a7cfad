"""The sibling branch (wisv/decoding/siblings.py): its tree, its pass on the verify session and the engine, the cache
after the commit, and unchanged decisions with it on."""
from __future__ import annotations

import pytest
import torch

from tests.tiny_pair import make_pair
from wisv.decoding.kvcache import crop_to
from wisv.decoding.sessions import VerifySession
from wisv.decoding.siblings import sibling_inputs, sibling_tree
from wisv.decoding.speculative import AcceptAll, RejectAll, speculative_generate
from wisv.decoding.tree import check_parents, depths
from wisv.head.features import SCALARS, SIBLING_SCALARS
from wisv.serving.batchverify import BatchVerifier, EngineConfig
from wisv.serving.engine import VerifyRequest

EOS = 60


@pytest.mark.parametrize("k, positions, want", [
    (4, [0], [-1, 0, 1, 2, -1]),  # j = 0: a second child of the root
    (4, [1, 3], [-1, 0, 1, 2, 0, 2]),  # beside d_1 (parent d_0) and beside d_3 (parent d_2)
    (1, [0], [-1, -1]),
    (3, [], [-1, 0, 1]),  # no mismatch: the chain alone
])
def test_sibling_tree_parents(k, positions, want):
    draft = list(range(10, 10 + k))
    tokens, parents = sibling_tree(draft, positions, [50 + j for j in positions])
    assert parents == want
    assert tokens == draft + [50 + j for j in positions]
    check_parents(parents)
    d = depths(parents)
    assert [d[k + i] for i in range(len(positions))] == [d[j] for j in positions]  # each sibling at d_j's depth


def test_sibling_tree_refuses_bad_positions():
    with pytest.raises(ValueError, match="outside"):
        sibling_tree([1, 2], [2], [3])
    with pytest.raises(ValueError, match="positions for"):
        sibling_tree([1, 2], [0, 1], [3])


def test_sibling_inputs_positions_and_mask():
    pos, mask = sibling_inputs(3, [0, 2], prefix_len=5)
    assert pos.tolist() == [5 + 1, 5 + 3]  # the root at slot 5: d_j (and its sibling) at 5 + 1 + j
    allowed = (mask[0, 0] == 0).int().tolist()  # [2, 5 + 1 + 3 + 2]
    assert allowed[0] == [1] * 5 + [1, 0, 0, 0] + [1, 0]  # beside d_0: the prefix, the root, itself
    assert allowed[1] == [1] * 5 + [1, 1, 1, 0] + [0, 1]  # beside d_2: prefix, root, d_0, d_1, itself


@pytest.fixture(scope="module")
def pair():
    return make_pair("llama", 32, 2, 4, 2)


def test_sibling_rows_equal_a_chain_that_drafted_the_target_token(pair):
    """The sibling at j reads exactly d_j's context: its rows equal a chain pass whose token at j is t*."""
    _, target = pair
    prompt, draft = [3, 7, 11, 2, 9], [5, 6, 7, 8]
    t = VerifySession(target, prompt)
    t.verify(draft)
    sib = t.verify_siblings(draft, [1, 3], [40, 41])
    for i, (j, tok) in enumerate([(1, 40), (3, 41)]):
        alt = VerifySession(target, prompt).verify(draft[:j] + [tok])
        torch.testing.assert_close(sib.logits[i], alt.logits[j + 1], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(sib.hidden[i], alt.hidden[j + 1], rtol=1e-4, atol=1e-4)


def test_verify_siblings_needs_the_chain_pass(pair):
    _, target = pair
    t = VerifySession(target, [3, 7, 11])
    with pytest.raises(ValueError, match="chain's pass"):
        t.verify_siblings([5, 6], [0], [9])


def _keys(cache) -> list[torch.Tensor]:
    return [layer.keys.clone() for layer in cache.layers] + [layer.values.clone() for layer in cache.layers]


@pytest.mark.parametrize("n_accepted", [0, 2, 4])
def test_cache_after_commit_equals_the_chain_only_one(pair, n_accepted):
    _, target = pair
    prompt, draft = [3, 7, 11, 2, 9], [5, 6, 7, 8]
    plain, sib = VerifySession(target, prompt), VerifySession(target, prompt)
    blk = plain.verify(draft)
    blk_s = sib.verify(draft)
    sib.verify_siblings(draft, [0, 2], [30, 31])
    torch.testing.assert_close(blk_s.logits, blk.logits, rtol=0, atol=0)  # the decision's rows: the same pass
    plain.commit(draft, n_accepted, 12)
    sib.commit(draft, n_accepted, 12)
    assert sib.cached_len == plain.cached_len and sib.seq == plain.seq
    for a, b in zip(_keys(sib.cache), _keys(plain.cache)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("policy", [RejectAll(), AcceptAll()], ids=["greedy", "accept-all"])
def test_outputs_with_siblings_equal_those_without(pair, policy):
    """Lossless greedy stays the target's greedy output, and WISV's decisions are unchanged, with the sibling on."""
    drafter, target = pair
    for prompt in ([3, 7, 11], [1, 2, 3, 4, 5, 6], [42]):
        runs = [speculative_generate(drafter, target, prompt, max_new_tokens=40, draft_len=6, rule="wisv",
                                     policy=policy, eos_token_id=EOS, sibling=s) for s in (False, True)]
        assert runs[0].tokens == runs[1].tokens
        assert [r.accepted for r in runs[0].rounds] == [r.accepted for r in runs[1].rounds]
        for off, on in zip(runs[0].rounds, runs[1].rounds):
            if off.edge is None:
                assert on.edge is None
                continue
            sib = [SCALARS.index(c) for c in SIBLING_SCALARS]
            rest = [i for i in range(len(SCALARS)) if i not in sib]
            torch.testing.assert_close(on.edge.scalars[:, rest], off.edge.scalars[:, rest], rtol=0, atol=0)
            assert off.edge.scalars[:, sib].isnan().all() and not on.edge.scalars[:, sib].isnan().any()
    assert any(r.mismatches for r in runs[1].rounds)  # the sibling pass ran


def test_engine_siblings_equal_the_session_ones_and_commit_drops_them(pair):
    _, target = pair
    prompt, draft = [3, 7, 11, 2, 9], [5, 6, 7, 8]
    t = VerifySession(target, prompt)
    t.verify(draft)
    want = t.verify_siblings(draft, [1, 2], [40, 41])
    eng = BatchVerifier(target, EngineConfig())
    eng.open("a", prompt)
    eng.open("b", [4, 4, 4])
    eng.verify([VerifyRequest("a", draft), VerifyRequest("b", [1, 2])])  # batched: a's cache is a view of the batch
    got = eng.verify_siblings("a", [1, 2], [40, 41])
    torch.testing.assert_close(got.logits, want.logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got.hidden, want.hidden, rtol=1e-4, atol=1e-4)
    eng.commit("a", 1, 12)
    t.commit(draft, 1, 12)
    assert eng.sessions["a"].cached_len == t.cached_len == len(t.seq) - 1
    after = eng.verify([VerifyRequest("a", [9, 9])])["a"]
    torch.testing.assert_close(after.logits, t.verify([9, 9]).logits, rtol=1e-4, atol=1e-4)


def test_engine_siblings_feed_a_dropped_chain_again(pair):
    _, target = pair
    prompt, draft = [3, 7, 11, 2, 9], [5, 6, 7]
    t = VerifySession(target, prompt)
    t.verify(draft)
    want = t.verify_siblings(draft, [0], [40])
    eng = BatchVerifier(target, EngineConfig())
    eng.open("a", prompt)
    eng.verify([VerifyRequest("a", draft)])
    st = eng.sessions["a"]
    crop_to(st.cache, 2)  # as if the budget had dropped most of it
    st.cached_len = 2
    got = eng.verify_siblings("a", [0], [40])
    torch.testing.assert_close(got.logits, want.logits, rtol=1e-4, atol=1e-4)
