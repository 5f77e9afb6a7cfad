"""Shared test helper: a tiny random Llama/Qwen2 target and a drafter that is a noisy copy of it."""
import copy

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM


def make_pair(family: str = "llama", hidden: int = 32, layers: int = 2, heads: int = 4, kv: int = 2, *,
              vocab: int = 61, eos: int = 60, bos: int = 0, pad: int = 0, seed: int = 0):
    """A random target and a drafter that is a noisy copy of it (high but imperfect agreement)."""
    cls_cfg, cls_model = (LlamaConfig, LlamaForCausalLM) if family == "llama" else (Qwen2Config, Qwen2ForCausalLM)
    cfg = cls_cfg(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv, intermediate_size=2 * hidden, initializer_range=0.15,
                  eos_token_id=eos, bos_token_id=bos, pad_token_id=pad, max_position_embeddings=512)
    torch.manual_seed(seed)
    target = cls_model(cfg).eval()
    drafter = copy.deepcopy(target)
    with torch.no_grad():
        for p in drafter.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return drafter, target
