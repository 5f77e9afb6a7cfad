"""Tree verification on random Llama/Qwen2 pairs and the built-in pair: lossless w.r.t. target greedy under eager
and sdpa attention, the 4D mask honoured, hand-built trees with a deep non-first branch, both caches compacted."""
import pytest
import torch
from transformers import DynamicCache

from tests.tiny_pair import make_pair
from wisv.decoding.lossless import check_lossless
from wisv.decoding.sessions import DraftSession, VerifySession, cached_forward
from wisv.decoding.tree import greedy_path
from wisv.decoding.treedraft import draft_tree
from wisv.decoding.treespec import tree_generate
from wisv.models.loader import load_pair
from wisv.tasks.evaluate import encode_prompt, greedy_reference
from wisv.tasks.toydata import load_split

IMPLS = ("eager", "sdpa")


@pytest.fixture(scope="module", params=[("llama", 32, 2, 4, 2), ("qwen2", 48, 2, 4, 2)], ids=lambda s: s[0])
def pair(request):
    return make_pair(*request.param)


def _use(impl: str, *models) -> None:
    for m in models:
        m.set_attn_implementation(impl)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("budget,width,proactive", [(1, 1, 0), (4, 1, 0), (8, 2, 3), (16, 1, 4)])
def test_tree_decoding_is_lossless(pair, impl, budget, width, proactive):
    drafter, target = pair
    _use(impl, drafter, target)
    gen = torch.Generator().manual_seed(budget)
    for _ in range(2):
        prompt = torch.randint(1, 60, (int(torch.randint(1, 10, (1,), generator=gen)),), generator=gen).tolist()
        ref = greedy_reference(target, prompt, max_new_tokens=40)
        out = tree_generate(drafter, target, prompt, max_new_tokens=40, budget=budget, width=width,
                            proactive=proactive)
        rep = check_lossless(target, prompt, ref, out.tokens)
        assert rep.ok, f"diverged at {rep.position} with top-2 gap {rep.gap}"
        assert all(r.size <= budget + proactive for r in out.rounds)


@pytest.mark.parametrize("max_new", [1, 2, 5])
def test_every_round_drafts_a_tree_even_with_one_token_left(pair, max_new):
    """As the live UE (a DRAFT holds >= 1 token): the last round drafts 1 token, not an empty tree."""
    drafter, target = pair
    _use("eager", drafter, target)
    prompt = [3, 9, 4]
    out = tree_generate(drafter, target, prompt, max_new_tokens=max_new, budget=4)
    assert all(r.size >= 1 for r in out.rounds)
    assert out.tokens == greedy_reference(target, prompt, max_new_tokens=max_new)[:len(out.tokens)]


def _hand_tree(target, prompt, depth=4):
    """Root children: two wrong tokens then the target's greedy token; under each greedy node a wrong sibling first,
    then the next greedy token: the accepted path is the last branch at every level."""
    ref = greedy_reference(target, prompt, max_new_tokens=depth + 1)
    tokens, parents, parent = [], [], -1
    for d in range(depth):
        wrong = [(ref[d] + 1 + j) % 59 + 1 for j in range(2 if d == 0 else 1)]
        for w in wrong:
            tokens.append(w)
            parents.append(parent)
            tokens.append(w)  # a wrong node's child, to make the tree bushy
            parents.append(len(tokens) - 2)
        tokens.append(ref[d])
        parents.append(parent)
        parent = len(tokens) - 1
    return tokens, parents, ref


@pytest.mark.parametrize("impl", IMPLS)
def test_hand_built_deep_non_first_branch_and_mask(pair, impl):
    _, target = pair
    _use(impl, target)
    prompt = [5, 9, 2, 7, 3]
    tokens, parents, ref = _hand_tree(target, prompt)
    t = VerifySession(target, prompt)
    blk = t.verify_tree(tokens, parents)
    path, nxt = greedy_path(tokens, parents, blk.argmax.tolist())
    assert [tokens[i] for i in path] == ref[:4] and nxt == ref[4]
    assert path[0] == 4 and all(b > a + 1 for a, b in zip(path, path[1:]))  # never the first child
    chain = target(torch.tensor([prompt + ref[:4]])).logits[0, len(prompt) - 1:].float()  # the path, no tree
    rows = blk.logits[[0] + [1 + i for i in path]]
    assert torch.allclose(rows, chain, atol=1e-4), "the tree mask was not honoured"
    committed = t.commit_path(tokens, path, nxt)
    assert committed == ref[:5] and t.cached_len == len(t.seq) - 1
    fresh = VerifySession(target, t.seq)  # the compacted cache equals a fresh prefill
    for a, b in zip(t.cache.layers, fresh.cache.layers):
        assert torch.allclose(a.keys, b.keys, atol=1e-5) and torch.allclose(a.values, b.values, atol=1e-5)


def test_drafter_cache_drops_tree_branches(pair):
    drafter, _ = pair
    d = DraftSession(drafter, [4, 8, 15])
    st = draft_tree(d, 8)
    assert d.cached_len == 3 + len(st.slots)
    d.commit([st.tree.tokens[0], 7])
    assert d.cached_len <= len(d.seq) - 1
    logits, _ = d.forward(d.seq[d.cached_len:])
    fresh, _ = cached_forward(drafter, DynamicCache(), 0, d.seq)
    assert torch.allclose(logits[-1], fresh[-1], atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("impl", IMPLS)
def test_tree_decoding_is_lossless_on_builtin_pair(impl):
    drafter, target, tok = load_pair()
    _use(impl, drafter, target)
    for p in load_split("test", 4):
        ids = encode_prompt(tok, p.prompt)
        ref = greedy_reference(target, ids)
        out = tree_generate(drafter, target, ids, max_new_tokens=160, budget=16, proactive=4)
        rep = check_lossless(target, ids, ref, out.tokens)
        assert rep.ok, f"diverged at {rep.position} with top-2 gap {rep.gap}"
        assert out.aal > 1
