"""Real architectures' shapes for scripts/bench/scale.py and the GPU check (pure): HF configs, parameter counts,
random prompts, and per-round payload bytes of the latency model (wisv/timing/latency.py, SPEC eqs. 3-9) beside the
bytes a run measured."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pandas as pd

from protocols.accounting import wire_payload_bits
from wisv.timing.latency import PayloadBits, s_req, s_sh2
from wisv.timing.protodesc import describe, downlink_bits, uplink_bits


@dataclass(frozen=True)
class Shape:
    """One decoder-only architecture's dimensions (its published config.json)."""

    name: str  # the model it copies, e.g. Qwen2.5-0.5B
    model_type: str  # transformers model_type: llama | qwen2
    vocab: int  # vocabulary size V, tokens
    hidden: int  # hidden size d
    layers: int  # decoder layers
    heads: int  # attention heads
    kv_heads: int  # key/value heads (GQA)
    intermediate: int  # MLP width
    tied: bool  # LM head shares the input embedding
    rope_theta: float  # RoPE base
    context: int  # max_position_embeddings, tokens
    bos: int  # BOS token id
    eos: int  # EOS token id
    rope_scaling: float | None = None  # Llama-3 RoPE scaling factor (None: none)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


LLAMA_1B = Shape("Llama-3.2-1B", "llama", 128256, 2048, 16, 32, 8, 8192, True, 500000.0, 131072, 128000, 128001, 32.0)
LLAMA_8B = Shape("Llama-3.1-8B", "llama", 128256, 4096, 32, 32, 8, 14336, False, 500000.0, 131072, 128000, 128001, 8.0)
QWEN_05B = Shape("Qwen2.5-0.5B", "qwen2", 151936, 896, 24, 14, 2, 4864, True, 1000000.0, 32768, 151643, 151643)
QWEN_15B = Shape("Qwen2.5-1.5B", "qwen2", 151936, 1536, 28, 12, 2, 8960, True, 1000000.0, 32768, 151643, 151643)
PAIRS: dict[str, tuple[Shape, Shape]] = {"qwen": (QWEN_05B, QWEN_15B),
                                         "llama": (LLAMA_1B, LLAMA_8B)}  # name -> (drafter, target)
ROUND_PROTOCOLS = ("greedy", "fh", "sh", "reject")  # protocols bench_scale runs (the model predicts every one's)


def hf_config(shape: Shape) -> dict:
    """config.json keyword arguments of ``shape`` for ``transformers.AutoConfig.for_model``."""
    kw = {"vocab_size": shape.vocab, "hidden_size": shape.hidden, "num_hidden_layers": shape.layers,
          "num_attention_heads": shape.heads, "num_key_value_heads": shape.kv_heads,
          "intermediate_size": shape.intermediate, "tie_word_embeddings": shape.tied, "rope_theta": shape.rope_theta,
          "max_position_embeddings": shape.context, "bos_token_id": shape.bos, "eos_token_id": shape.eos,
          "head_dim": shape.head_dim}
    if shape.rope_scaling is not None:
        kw["rope_scaling"] = {"rope_type": "llama3", "factor": shape.rope_scaling, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    return kw


def param_count(shape: Shape) -> int:
    """Parameters of the architecture: embeddings (and an untied LM head), attention (Qwen2: q/k/v biases), MLP,
    the two norms per layer and the final norm."""
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    attn = 2 * shape.hidden * q + 2 * shape.hidden * kv + (q + 2 * kv if shape.model_type == "qwen2" else 0)
    layer = attn + 3 * shape.hidden * shape.intermediate + 2 * shape.hidden
    return shape.vocab * shape.hidden * (1 if shape.tied else 2) + shape.layers * layer + shape.hidden


def random_prompts(n: int, length: int, vocab: int, seed: int) -> list[dict]:
    """``n`` rows of ``length`` random token ids (below the special tokens' range), as --prompts-file JSONL rows."""
    rng, top = random.Random(seed), min(vocab, 100000)
    return [{"prompt_id": f"rand-{i}", "prompt_ids": [rng.randrange(1000, top) for _ in range(length)]}
            for i in range(n)]


def model_round_bits(protocol: str, k: int, m: int, pb: PayloadBits) -> tuple[float, float]:
    """(uplink, downlink) bits of one round of ``protocol`` with K = ``k`` drafted and ``m`` queried positions: its
    described DRAFT and VERDICT (s_greedy, s_fh, s_reject, s_tree; eq. 4, s_tree_fb), and for a protocol that
    queries hidden states (sh), HIDDEN (s_sh2) up and HIDDEN_REQ (s_req) down when m > 0."""
    d = describe(protocol)
    up, down = uplink_bits(d, k, pb), downlink_bits(d, k, pb)
    if d.hidden_query and m:
        up, down = up + s_sh2(m, pb), down + s_req(m, pb)
    return up, down


def compare_bytes(protocol: str, rounds: pd.DataFrame, d_d: int, vocab: int, k: int) -> dict:
    """Measured bytes per round (the records' uplink/downlink_bytes) against the model's, with this wire format's
    packing (``wire_payload_bits``: int32 ids and positions, fp16 hidden/probs, measured message overheads) and the
    paper's (``PayloadBits.paper``: ceil(log2 V)-bit ids, no overheads); ratio = measured / model."""
    wire, paper = wire_payload_bits(d_d, vocab, k), PayloadBits.paper(vocab, d_d)
    m = rounds["queried"].fillna(0).astype(int) if "queried" in rounds else pd.Series(0, index=rounds.index)
    pairs = list(zip(rounds["drafted"].astype(int), m))
    out = {"rounds": len(pairs), "drafted_per_round": _mean([d for d, _ in pairs]),
           "queried_per_round": _mean([q for _, q in pairs])}
    for side, col in (("up", "uplink_bytes"), ("down", "downlink_bytes")):
        measured = _mean(rounds[col].astype(float).tolist())
        i = 0 if side == "up" else 1
        model = _mean([model_round_bits(protocol, d, q, wire)[i] / 8 for d, q in pairs])
        out |= {f"{side}_bytes_measured": measured, f"{side}_bytes_model": model,
                f"{side}_ratio": measured / model if model else math.nan,
                f"{side}_bytes_model_paper": _mean([model_round_bits(protocol, d, q, paper)[i] / 8 for d, q in pairs])}
    out["up_bytes_per_drafted_token"] = out["up_bytes_measured"] / out["drafted_per_round"]
    return out


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan
