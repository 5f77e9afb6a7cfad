"""wisv.decoding.leanstep: the lean forward gives model(...)'s logits, hidden states and cache, for one token and for a
block after a cache, and only for the models it reproduces."""
from unittest import mock

import pytest
import torch
from transformers import DynamicCache

from tests.tiny_pair import make_pair
from wisv.decoding.kvcache import crop_to
from wisv.decoding.leanstep import lean_forward, lean_ok
from wisv.decoding.sessions import cached_forward
from wisv.decoding.tree import node_mask, tree_positions, with_root

SHAPES = [("llama", 32, 2, 4, 2), ("llama", 64, 3, 4, 4), ("llama", 48, 2, 6, 1)]
PROMPT = [3, 9, 14, 2, 7]


def _reference(model, cache, position, ids, keep=0, positions=None, mask=None):
    slots = torch.arange(position, position + len(ids))
    pos = slots if positions is None else positions
    extra = {} if mask is None else {"attention_mask": mask}
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True, cache_position=slots,
                    position_ids=pos[None], output_hidden_states=True, logits_to_keep=keep, **extra)
    return out.logits[0], out.hidden_states[-1][0]


def _same(lean, ref):
    assert lean[0].shape == ref[0].shape and lean[1].shape == ref[1].shape
    assert torch.allclose(lean[0], ref[0], atol=1e-5, rtol=0)
    assert torch.allclose(lean[1], ref[1], atol=1e-5, rtol=0)


def _same_cache(a, b, length):
    assert a.get_seq_length() == b.get_seq_length() == length
    for la, lb in zip(a.layers, b.layers):
        assert torch.allclose(la.keys, lb.keys, atol=1e-6) and torch.allclose(la.values, lb.values, atol=1e-6)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[1]}x{s[2]}-{s[3]}/{s[4]}")
def test_one_token_steps_are_the_models_forward(shape):
    _, target = make_pair(*shape)
    assert lean_ok(target)
    a, b = DynamicCache(), DynamicCache()
    _same(lean_forward(target, b, 0, PROMPT), _reference(target, a, 0, PROMPT))  # a prefill: empty cache, n > 1
    tok = 11
    for i in range(6):  # a few steps: the cache each one extends must match too
        lean = lean_forward(target, b, len(PROMPT) + i, [tok])
        _same(lean, _reference(target, a, len(PROMPT) + i, [tok]))
        tok = int(lean[0][0].argmax())
    _same_cache(a, b, len(PROMPT) + 6)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[1]}x{s[2]}-{s[3]}/{s[4]}")
@pytest.mark.parametrize("keep", [0, 3])
def test_a_block_after_a_cache_is_the_models_forward(shape, keep):
    """A verification pass: several tokens after cached ones need the causal mask over the cache; then a rollback and
    a second block on the cropped cache."""
    _, target = make_pair(*shape)
    a, b = DynamicCache(), DynamicCache()
    _reference(target, a, 0, PROMPT), lean_forward(target, b, 0, PROMPT)
    block = [11, 4, 30, 8, 19]
    _same(lean_forward(target, b, len(PROMPT), block, keep), _reference(target, a, len(PROMPT), block, keep))
    _same_cache(a, b, len(PROMPT) + len(block))
    for c in (a, b):
        crop_to(c, len(PROMPT) + 2)
    again = [6, 2, 40]
    _same(lean_forward(target, b, len(PROMPT) + 2, again, keep), _reference(target, a, len(PROMPT) + 2, again, keep))
    _same_cache(a, b, len(PROMPT) + 2 + len(again))


def test_the_mask_is_causal():
    """A later token of the block must not change an earlier one's logits."""
    _, target = make_pair(*SHAPES[0])
    rows = []
    for last in (5, 50):
        c = DynamicCache()
        lean_forward(target, c, 0, PROMPT)
        rows.append(lean_forward(target, c, len(PROMPT), [11, 4, last])[0])
    assert torch.equal(rows[0][:2], rows[1][:2]) and not torch.equal(rows[0][2], rows[1][2])


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[1]}x{s[2]}-{s[3]}/{s[4]}")
@pytest.mark.parametrize("parents", [[-1, 0, 0, 1, -1], [-1]], ids=["tree", "one-node"])
def test_a_tree_pass_is_the_models_forward(shape, parents):
    """A draft tree (or a single sibling) after a cache: its own position ids by depth and the additive tree mask."""
    _, target = make_pair(*shape)
    a, b = DynamicCache(), DynamicCache()
    _reference(target, a, 0, PROMPT), lean_forward(target, b, 0, PROMPT)
    rooted = with_root(parents)
    nodes = list(range(1, len(rooted)))  # the tree's nodes after the cached root
    cached = len(PROMPT)
    mask = node_mask(rooted, nodes, nodes, cached, target.dtype)
    pos = tree_positions(rooted, cached)[nodes]
    ids = [11, 4, 30, 8, 19][:len(nodes)]
    _same(lean_forward(target, b, cached, ids, 0, pos, mask), _reference(target, a, cached, ids, 0, pos, mask))
    _same_cache(a, b, cached + len(nodes))


def test_cached_forward_takes_the_lean_pass_for_the_final_layer_of_a_plain_llama():
    _, target = make_pair(*SHAPES[0])
    with mock.patch("wisv.decoding.sessions.lean_forward", wraps=lean_forward) as lean:
        cached_forward(target, DynamicCache(), 0, PROMPT, keep=2)
        tree = torch.zeros(1, 1, len(PROMPT), len(PROMPT))
        cached_forward(target, DynamicCache(), 0, PROMPT, positions=torch.arange(len(PROMPT)), mask=tree)
        assert lean.call_count == 2
        cached_forward(target, DynamicCache(), 0, PROMPT, hidden_layer=1)  # an inner layer: model(...)'s states
        assert lean.call_count == 2


def test_other_models_keep_their_forward():
    _, qwen = make_pair("qwen2", 32, 2, 4, 2)
    _, llama = make_pair("llama", 32, 2, 4, 2)
    assert not lean_ok(qwen)
    llama.config.mlp_bias = True  # a variant the pass does not reproduce
    assert not lean_ok(llama)
