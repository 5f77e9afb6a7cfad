"""A lean one-token decode step for Llama causal LMs: the arithmetic of ``transformers``' forward over the same weights
and the same ``DynamicCache``, without its per-call Python (mask building, output capture, keyword plumbing).

A drafter token is one such step; on the SmolLM2 drafter (4 layers) the forward's Python is about 1.5 ms of a 15 ms
token on one CPU thread.  ``lean_ok`` says which models the step reproduces: a plain ``LlamaForCausalLM`` (default
RoPE, SiLU, no biases, SDPA attention, no sliding window); every other model keeps ``model(...)``.  Tests check the
logits against ``model(...)`` (tests/wisv/decoding/test_leanstep.py).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import DynamicCache, LlamaForCausalLM, PreTrainedModel


def lean_ok(model: PreTrainedModel) -> bool:
    """Whether ``model``'s one-token forward is ``lean_step``'s: a LlamaForCausalLM without variants."""
    if type(model) is not LlamaForCausalLM:
        return False
    c = model.config
    return (c.hidden_act == "silu" and not c.attention_bias and not c.mlp_bias and c.pretraining_tp == 1
            and c.rope_parameters.get("rope_type", "default") == "default" and c._attn_implementation == "sdpa")


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """LlamaRMSNorm: normalised in float32, scaled by ``weight`` in the input's dtype."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x [1, heads, 1, d] (rotate_half's convention)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


@torch.no_grad()
def lean_step(model: LlamaForCausalLM, cache: DynamicCache, position: int, token: int,
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Feed one ``token`` at ``position`` (the cache holds exactly ``position`` positions; it is extended in place):
    logits [1, V] of the model's LM head and the final (post-norm) hidden state [1, d], in the model's dtype."""
    body, eps = model.model, model.config.rms_norm_eps
    x = body.embed_tokens.weight[token].view(1, 1, -1)  # [1, 1, d]
    rot = body.rotary_emb
    freqs = float(position) * rot.inv_freq.to(device=x.device, dtype=torch.float)  # [d_head / 2]
    emb = torch.cat((freqs, freqs))
    cos, sin = (emb.cos() * rot.attention_scaling).to(x.dtype), (emb.sin() * rot.attention_scaling).to(x.dtype)
    for i, layer in enumerate(body.layers):
        a, mlp = layer.self_attn, layer.mlp
        r = _rms(x, layer.input_layernorm.weight, eps)
        q = F.linear(r, a.q_proj.weight).view(1, 1, -1, a.head_dim).transpose(1, 2)  # [1, H, 1, d_head]
        k = F.linear(r, a.k_proj.weight).view(1, 1, -1, a.head_dim).transpose(1, 2)  # [1, KV, 1, d_head]
        v = F.linear(r, a.v_proj.weight).view(1, 1, -1, a.head_dim).transpose(1, 2)
        k, v = cache.update(_rope(k, cos, sin), v, i)
        o = F.scaled_dot_product_attention(_rope(q, cos, sin), k, v, scale=a.scaling,
                                           enable_gqa=a.num_key_value_groups > 1)
        x = x + F.linear(o.transpose(1, 2).reshape(1, 1, -1), a.o_proj.weight)
        r = _rms(x, layer.post_attention_layernorm.weight, eps)
        x = x + F.linear(F.silu(F.linear(r, mlp.gate_proj.weight)) * F.linear(r, mlp.up_proj.weight),
                         mlp.down_proj.weight)
    h = _rms(x, body.norm.weight, eps)[0]  # [1, d]
    return model.get_output_embeddings()(h), h
