"""Pure FLOPs and compute-time model of drafting, verification and the decision head (SPEC eqs. 11-13, 15, 17).

Units: FLOPs are plain counts (1 multiply-add = 2 FLOPs), times in seconds.  ``ModelDims`` describes
a decoder-only transformer; ``ARCHITECTURES`` holds the paper's four models as data, copied from
their published Hugging Face ``config.json``.  Hardware (peak and utilisation) lives in
``wisv.timing.hardware``; eq. 11 (``compute_s``) turns FLOPs into seconds on one ``HardwareProfile``.

Context length convention (SPEC eqs. 12, 15): ``f(l)`` is the cost of one new token whose
attention reads ``l`` cached positions.  Drafting the j-th token of a round (j = 0..K-1) costs
``f_d(L + j)``; verifying the block costs ``f_t(L + 1) + ... + f_t(L + K)``.
"""
from __future__ import annotations

from dataclasses import dataclass

from wisv.timing.hardware import HardwareProfile


@dataclass(frozen=True)
class ModelDims:
    """Shape of a decoder-only transformer (only what eq. 13 needs)."""

    n_layers: int  # number of decoder blocks
    d_model: int  # hidden size d (elements)
    d_ff: int  # MLP intermediate size d_ff (elements)
    vocab: int  # vocabulary size V (tokens)
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads; < n_heads means grouped-query attention (GQA)

    def __post_init__(self) -> None:
        for name in ("n_layers", "d_model", "d_ff", "vocab", "n_heads", "n_kv_heads"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"ModelDims.{name} must be a positive int, got {v!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"ModelDims.n_kv_heads ({self.n_kv_heads}) must divide n_heads ({self.n_heads})")

    @property
    def kv_ratio(self) -> float:
        """n_kv_heads / n_heads: 1 for multi-head attention, < 1 for GQA."""
        return self.n_kv_heads / self.n_heads

    @classmethod
    def from_hf_config(cls, cfg: object) -> ModelDims:
        """Read a transformers config (Llama / Qwen2 / Mistral attribute names).

        A missing or None ``num_key_value_heads`` means plain multi-head attention (the HF
        convention), so it falls back to ``num_attention_heads``; any other missing attribute
        raises ValueError naming it.
        """
        names = {"n_layers": "num_hidden_layers", "d_model": "hidden_size", "d_ff": "intermediate_size",
                 "vocab": "vocab_size", "n_heads": "num_attention_heads"}
        vals = {}
        for field_name, attr in names.items():
            v = getattr(cfg, attr, None)
            if v is None:
                raise ValueError(f"{type(cfg).__name__} has no '{attr}' (needed for ModelDims.{field_name})")
            vals[field_name] = int(v)
        kv = getattr(cfg, "num_key_value_heads", None)
        return cls(**vals, n_kv_heads=int(kv) if kv is not None else vals["n_heads"])


# Published config.json values of the paper's models (Llama pair in simulation, Qwen pair on hardware).
ARCHITECTURES: dict[str, ModelDims] = {
    "llama-3.2-1b": ModelDims(n_layers=16, d_model=2048, d_ff=8192, vocab=128256, n_heads=32, n_kv_heads=8),
    "llama-3.1-8b": ModelDims(n_layers=32, d_model=4096, d_ff=14336, vocab=128256, n_heads=32, n_kv_heads=8),
    "qwen2.5-0.5b": ModelDims(n_layers=24, d_model=896, d_ff=4864, vocab=151936, n_heads=14, n_kv_heads=2),
    "qwen2.5-7b": ModelDims(n_layers=28, d_model=3584, d_ff=18944, vocab=152064, n_heads=28, n_kv_heads=4),
}


def get_architecture(name: str) -> ModelDims:
    """Named architecture from ``ARCHITECTURES``."""
    try:
        return ARCHITECTURES[name]
    except KeyError:
        raise ValueError(f"unknown architecture {name!r}; known: {sorted(ARCHITECTURES)}") from None


@dataclass(frozen=True)
class FlopConstants:
    """Implementation constants c1..c4 of eq. 13 (defaults: a Llama-style block, 2 FLOPs per multiply-add).

    GQA: with ``n_kv_heads < n_heads`` the K and V projections are d x (d * n_kv/n_heads), so the
    projections cost ``2 * (2 + 2 * n_kv/n_heads) * d^2`` rather than ``8 * d^2``.  Eq. 13 as written
    ignores this (``gqa=False``, the default, keeps the paper's formula and overcounts the
    projections of GQA models: 8 d^2 vs 5 d^2 for Llama-3).  ``gqa=True`` scales the K/V half of c2
    by n_kv/n_heads; then ``f(0)`` equals twice the linear-layer weight count of a real Llama/Qwen2.
    GQA does not change the attention term: every query head still scores all ``l`` cached keys
    (GQA saves KV-cache memory and bandwidth, not FLOPs).
    """

    c1: float = 4.0  # attention over the KV cache, per layer: q.k scores (2ld) + weighted sum of values (2ld)
    c2: float = 8.0  # Q, K, V, O projections, per layer: 4 matrices of d x d at 2 FLOPs per weight
    c3: float = 6.0  # SwiGLU MLP, per layer: gate, up, down matrices of d x d_ff at 2 FLOPs per weight
    c4: float = 2.0  # output head (LM head): d x V matrix at 2 FLOPs per weight, once per token
    gqa: bool = False  # True: scale the K/V part of c2 by n_kv_heads / n_heads (see class docstring)

    def proj_coeff(self, dims: ModelDims) -> float:
        """Effective c2 for ``dims``: c2 itself, or c2 * (1 + n_kv/n_heads) / 2 with ``gqa``."""
        return self.c2 * (1.0 + dims.kv_ratio) / 2.0 if self.gqa else self.c2


DEFAULT_CONSTANTS = FlopConstants()


def flops_per_token(dims: ModelDims, l: float, c: FlopConstants = DEFAULT_CONSTANTS) -> float:
    """Eq. 13: f(l) = n_layers * (c1*l*d + c2*d^2 + c3*d*d_ff) + c4*d*V, for one token at context length l."""
    if l < 0:
        raise ValueError(f"context length l must be >= 0, got {l}")
    d = dims.d_model
    per_layer = c.c1 * l * d + c.proj_coeff(dims) * d * d + c.c3 * d * dims.d_ff
    return dims.n_layers * per_layer + c.c4 * d * dims.vocab


def draft_flops(dims: ModelDims, L: int, K: int, c: FlopConstants = DEFAULT_CONSTANTS) -> float:
    """Eq. 12: F_draft = sum_{j=0}^{K-1} f_d(L + j), K autoregressive drafter steps with a KV cache."""
    _check_block(L, K)
    return sum(flops_per_token(dims, L + j, c) for j in range(K))


def verify_flops(dims: ModelDims, L: int, K: int, c: FlopConstants = DEFAULT_CONSTANTS) -> float:
    """Eq. 15: F_verify = sum_{j=1}^{K} f_t(L + j), one parallel target pass over the causal block."""
    _check_block(L, K)
    return sum(flops_per_token(dims, L + j, c) for j in range(1, K + 1))


def head_flops(d_in: int, H: int) -> float:
    """Eq. 17: decision-head FLOPs per queried position, 2 * (d_in*H + H) (d_in -> H -> 1 MLP)."""
    if d_in <= 0 or H <= 0:
        raise ValueError(f"d_in and H must be > 0, got d_in={d_in}, H={H}")
    return 2.0 * (d_in * H + H)


def compute_s(flops: float, profile: HardwareProfile) -> float:
    """Eq. 11: T = F / (eta * F_peak), seconds."""
    if flops < 0:
        raise ValueError(f"flops must be >= 0, got {flops}")
    return flops / (profile.eta * profile.peak_tflops * 1e12)


def _check_block(L: int, K: int) -> None:
    if L < 0 or K < 0:
        raise ValueError(f"L and K must be >= 0, got L={L}, K={K}")
