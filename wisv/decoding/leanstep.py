"""A lean forward for Llama causal LMs: the arithmetic of ``transformers``' forward over the same weights and the same
``DynamicCache``, without its per-call Python (mask building, output capture, keyword plumbing).

A drafter token is one such pass, and so is a target's verification of a block or a tree.  On one CPU thread the
forward's Python is about 1.5 ms of a 15 ms token of the SmolLM2 drafter (4 layers), and about 12 ms of a 134 ms
9-token pass of its target (30 layers).  The attention runs as transformers' sdpa path runs it (``_attention``), so
the numbers are its numbers.  ``lean_ok`` says which models the pass reproduces: a plain ``LlamaForCausalLM`` (default
RoPE, SiLU, no biases, SDPA attention); every other model keeps ``model(...)``.  Tests check logits, hidden states and
cache against ``model(...)`` (tests/wisv/decoding/test_leanstep.py).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import DynamicCache, LlamaForCausalLM, PreTrainedModel


def lean_ok(model: PreTrainedModel) -> bool:
    """Whether ``model``'s forward is ``lean_forward``'s: a LlamaForCausalLM without variants."""
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
    """Rotary embedding of x [1, heads, n, d] with cos, sin [n, d] (rotate_half's convention)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, position: int, groups: int, scale: float,
               mask: torch.Tensor | None = None) -> torch.Tensor:
    """SDPA of n queries after ``position`` cached keys, as transformers' sdpa path runs it (so the numbers are its
    numbers).  Causal (``mask`` None): one query, or an empty cache, needs no mask and shares key heads (GQA); n queries
    after a cache take a boolean mask over keys repeated per query head.  A tree's additive ``mask`` [1, 1, n, L]:
    one query packs its heads by key head, more repeat the keys."""
    n = q.shape[2]
    if mask is None and (n == 1 or position == 0):
        return F.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=n > 1, enable_gqa=groups > 1)
    if mask is None:
        mask = torch.ones(n, position + n, dtype=torch.bool, device=q.device).tril(position)  # [n, L]
    if groups > 1 and n == 1:  # transformers' pack_gqa: [1, H, 1, d] -> [1, KV, groups, d]
        o = F.scaled_dot_product_attention(q.reshape(1, -1, groups, q.shape[-1]), k, v, attn_mask=mask, scale=scale)
        return o.reshape(1, -1, 1, o.shape[-1])
    if groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


@torch.no_grad()
def lean_forward(model: LlamaForCausalLM, cache: DynamicCache, position: int, ids: list[int], keep: int = 0,
                 positions: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Feed ``ids`` (n tokens) after the cache's ``position`` positions (it is extended in place): logits [n, V] of
    the model's LM head (``keep`` > 0: the last ``keep`` rows only) and the final (post-norm) hidden states [n, d], in
    the model's dtype.  A chain's tokens sit at positions ``position``.. under a causal mask; a tree's pass gives its
    ``positions`` [n] and additive ``mask`` [1, 1, n, position + n] (wisv.decoding.tree.node_mask)."""
    body, eps, n = model.model, model.config.rms_norm_eps, len(ids)
    w = body.embed_tokens.weight
    mask = None if mask is None else mask.to(device=w.device, dtype=w.dtype)
    x = w[torch.tensor(ids, device=w.device)].unsqueeze(0)  # [1, n, d]
    rot = body.rotary_emb
    slots = (torch.arange(position, position + n, device=x.device) if positions is None
             else positions.to(x.device)).float()  # [n] position ids
    freqs = torch.outer(slots, rot.inv_freq.to(device=x.device, dtype=torch.float))  # [n, d_head / 2]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = (emb.cos() * rot.attention_scaling).to(x.dtype), (emb.sin() * rot.attention_scaling).to(x.dtype)
    for i, layer in enumerate(body.layers):
        a, mlp = layer.self_attn, layer.mlp
        r = _rms(x, layer.input_layernorm.weight, eps)
        q = F.linear(r, a.q_proj.weight).view(1, n, -1, a.head_dim).transpose(1, 2)  # [1, H, n, d_head]
        k = F.linear(r, a.k_proj.weight).view(1, n, -1, a.head_dim).transpose(1, 2)  # [1, KV, n, d_head]
        v = F.linear(r, a.v_proj.weight).view(1, n, -1, a.head_dim).transpose(1, 2)
        k, v = cache.update(_rope(k, cos, sin), v, i)
        o = _attention(_rope(q, cos, sin), k, v, position, a.num_key_value_groups, a.scaling, mask)
        x = x + F.linear(o.transpose(1, 2).reshape(1, n, -1), a.o_proj.weight)
        r = _rms(x, layer.post_attention_layernorm.weight, eps)
        x = x + F.linear(F.silu(F.linear(r, mlp.gate_proj.weight)) * F.linear(r, mlp.up_proj.weight),
                         mlp.down_proj.weight)
    h = _rms(x, body.norm.weight, eps)[0]  # [n, d]
    return model.get_output_embeddings()(h[-keep:] if keep else h), h
