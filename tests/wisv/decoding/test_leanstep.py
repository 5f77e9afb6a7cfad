"""wisv.decoding.leanstep: the lean one-token step gives model(...)'s logits, hidden state and cache, and only for the
models it reproduces."""
import pytest
import torch
from transformers import DynamicCache

from tests.tiny_pair import make_pair
from wisv.decoding.leanstep import lean_ok, lean_step
from wisv.decoding.sessions import cached_forward

SHAPES = [("llama", 32, 2, 4, 2), ("llama", 64, 3, 4, 4), ("llama", 48, 2, 6, 1)]


def _prefilled(model, prompt):
    cache = DynamicCache()
    cached_forward(model, cache, 0, prompt)
    return cache


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[1]}x{s[2]}-{s[3]}/{s[4]}")
def test_the_lean_step_is_the_models_forward(shape):
    _, target = make_pair(*shape)
    assert lean_ok(target)
    prompt, tok = [3, 9, 14, 2, 7], 11
    a, b = _prefilled(target, prompt), _prefilled(target, prompt)
    for i in range(6):  # a few steps: the cache each one extends must match too
        with torch.no_grad():
            ref = target(input_ids=torch.tensor([[tok]]), past_key_values=a, use_cache=True,
                         position_ids=torch.tensor([[len(prompt) + i]]), output_hidden_states=True)
        logits, hidden = lean_step(target, b, len(prompt) + i, tok)
        assert torch.allclose(logits, ref.logits[0], atol=1e-5, rtol=0)
        assert torch.allclose(hidden, ref.hidden_states[-1][0], atol=1e-5, rtol=0)
        tok = int(logits[0].argmax())
    assert a.get_seq_length() == b.get_seq_length() == len(prompt) + 6
    assert torch.allclose(a.layers[0].keys, b.layers[0].keys, atol=1e-6)


def test_other_models_keep_their_forward():
    _, qwen = make_pair("qwen2", 32, 2, 4, 2)
    _, llama = make_pair("llama", 32, 2, 4, 2)
    assert not lean_ok(qwen)
    llama.config.mlp_bias = True  # a variant the step does not reproduce
    assert not lean_ok(llama)
