"""FLOPs model (SPEC eqs. 11-13, 15, 17), architecture table and hardware profiles, against hand-computed values."""
import json
import types

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from wisv.timing.compute import (
    ARCHITECTURES,
    FlopConstants,
    ModelDims,
    compute_s,
    draft_flops,
    flops_per_token,
    get_architecture,
    head_flops,
    verify_flops,
)
from wisv.timing.hardware import (
    PROFILES,
    HardwareProfile,
    get_profile,
    load_profile,
    roofline_eta,
    save_profile,
    with_roofline_eta,
)

# n_layers=2, d=4, d_ff=8, V=10, 2 heads, 1 kv head:
#   f(l) = 2 * (4*l*4 + 8*4*4 + 6*4*8) + 2*4*10 = 2 * (16 l + 128 + 192) + 80 = 32 l + 720
TINY = ModelDims(n_layers=2, d_model=4, d_ff=8, vocab=10, n_heads=2, n_kv_heads=1)


@pytest.mark.parametrize("l,expected", [(0, 720), (3, 816), (10, 1040)])
def test_eq13_by_hand(l, expected):
    assert flops_per_token(TINY, l) == expected


def test_eq13_custom_constants_and_gqa():
    # c = (1, 1, 1, 1): 2 * (4 l + 16 + 32) + 40 = 8 l + 136
    assert flops_per_token(TINY, 5, FlopConstants(1, 1, 1, 1)) == 8 * 5 + 136
    # gqa: c2_eff = 8 * (1 + 1/2) / 2 = 6 -> 2 * (16 l + 96 + 192) + 80 = 32 l + 656
    assert flops_per_token(TINY, 3, FlopConstants(gqa=True)) == 32 * 3 + 656
    mha = ModelDims(2, 4, 8, 10, n_heads=2, n_kv_heads=2)  # no GQA: the refinement changes nothing
    assert flops_per_token(mha, 3, FlopConstants(gqa=True)) == flops_per_token(mha, 3)


def test_eq12_eq15_sum_ranges():
    assert draft_flops(TINY, L=3, K=2) == 816 + 848              # f(3) + f(4): j = 0..K-1
    assert verify_flops(TINY, L=3, K=2) == 848 + 880             # f(4) + f(5): j = 1..K
    assert draft_flops(TINY, L=3, K=0) == verify_flops(TINY, L=3, K=0) == 0


def test_eq17_and_eq11_by_hand():
    assert head_flops(6, 3) == 2 * (6 * 3 + 3) == 42
    slow = HardwareProfile("toy", peak_tflops=1e-6, eta=0.5, source="test")  # 0.5 * 1e6 FLOP/s
    assert compute_s(1000, slow) == pytest.approx(1000 / 5e5)
    with pytest.raises(ValueError):
        head_flops(0, 3)
    with pytest.raises(ValueError):
        flops_per_token(TINY, -1)


def test_flops_grow_with_context_and_block():
    dims = get_architecture("llama-3.1-8b")
    assert verify_flops(dims, 500, 8) > verify_flops(dims, 100, 8)
    assert verify_flops(dims, 100, 9) > verify_flops(dims, 100, 8)
    assert draft_flops(dims, 100, 9) > draft_flops(dims, 100, 8)


ARCH_TABLE = [
    ("llama-3.2-1b", (16, 2048, 8192, 128256, 32, 8)),
    ("llama-3.1-8b", (32, 4096, 14336, 128256, 32, 8)),
    ("qwen2.5-0.5b", (24, 896, 4864, 151936, 14, 2)),
    ("qwen2.5-7b", (28, 3584, 18944, 152064, 28, 4)),
]


def _hf_config(name, dims):
    cls = LlamaConfig if name.startswith("llama") else Qwen2Config
    return cls(num_hidden_layers=dims[0], hidden_size=dims[1], intermediate_size=dims[2], vocab_size=dims[3],
               num_attention_heads=dims[4], num_key_value_heads=dims[5])


@pytest.mark.parametrize("name,dims", ARCH_TABLE)
def test_architecture_table_matches_published_configs(name, dims):
    assert get_architecture(name) == ModelDims(*dims)
    assert ModelDims.from_hf_config(_hf_config(name, dims)) == ARCHITECTURES[name]


@pytest.mark.parametrize("name,dims", ARCH_TABLE)
def test_gqa_flops_equal_twice_the_linear_weights(name, dims):
    """With gqa=True, f(0) = 2 FLOPs per weight of every nn.Linear (projections, MLP, LM head)."""
    model_cls = LlamaForCausalLM if name.startswith("llama") else Qwen2ForCausalLM
    with torch.device("meta"):  # shapes only, no memory
        model = model_cls(_hf_config(name, dims))
    n_linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert flops_per_token(ARCHITECTURES[name], 0, FlopConstants(gqa=True)) == 2 * n_linear


def test_llama_8b_eq13_overcounts_gqa_projections():
    dims = get_architecture("llama-3.1-8b")  # r = 8/32: projections 5 d^2 instead of 8 d^2
    diff = flops_per_token(dims, 0) - flops_per_token(dims, 0, FlopConstants(gqa=True))
    assert diff == 32 * 3 * 4096**2


def test_from_hf_config_tiny_and_errors():
    cfg = LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, vocab_size=100,
                      num_attention_heads=4, num_key_value_heads=2)
    assert ModelDims.from_hf_config(cfg) == ModelDims(2, 64, 128, 100, 4, 2)
    ns = types.SimpleNamespace(num_hidden_layers=2, hidden_size=64, intermediate_size=128, vocab_size=100,
                               num_attention_heads=4)  # no num_key_value_heads: plain multi-head attention
    assert ModelDims.from_hf_config(ns).n_kv_heads == 4
    del ns.intermediate_size
    with pytest.raises(ValueError, match="intermediate_size"):
        ModelDims.from_hf_config(ns)


def test_model_dims_validation_and_unknown_name():
    with pytest.raises(ValueError, match="d_model"):
        ModelDims(2, 0, 8, 10, 2, 1)
    with pytest.raises(ValueError, match="divide"):
        ModelDims(2, 4, 8, 10, n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="llama-3.1-8b"):
        get_architecture("gpt-5")


# ---- hardware profiles -------------------------------------------------------------------------

@pytest.mark.parametrize("name,peak,role", [("jetson-agx-orin", 42.5, "ue"), ("a40", 149.7, "edge"),
                                            ("a100", 312.0, "edge"), ("rtx4090", 165.2, "any")])
def test_profile_table(name, peak, role):
    p = get_profile(name)
    assert (p.peak_tflops, p.role) == (peak, role) and 0 < p.eta < 0.1 and p.source


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_builtin_eta_is_the_roofline_bound(name):
    """UE/any profiles: 1 token per forward (drafting); edge profiles: 8 tokens per forward (verification)."""
    p = PROFILES[name]
    tokens = 8 if p.role == "edge" else 1
    assert p.eta == pytest.approx(roofline_eta(p.peak_tflops, p.mem_bw_gbps, tokens), rel=0.05)
    assert with_roofline_eta(p, tokens).eta == pytest.approx(p.eta, rel=0.05)


def test_roofline_eta_by_hand():
    # 1 token, fp16: 1 FLOP/byte; 100 GB/s against 10 TFLOP/s -> 0.01; capped at 1
    assert roofline_eta(10.0, 100.0, 1) == pytest.approx(0.01)
    assert roofline_eta(10.0, 100.0, 1000) == 1.0


@pytest.mark.parametrize("kwargs,match", [({"peak_tflops": 0.0}, "peak_tflops"), ({"eta": 0.0}, "eta"),
                                          ({"eta": 1.5}, "eta"), ({"role": "cloud"}, "role"),
                                          ({"mem_bw_gbps": -1.0}, "mem_bw_gbps")])
def test_profile_validation(kwargs, match):
    base = {"name": "x", "peak_tflops": 10.0, "eta": 0.1, "source": "test"}
    with pytest.raises(ValueError, match=match):
        HardwareProfile(**{**base, **kwargs})


def test_profile_json_round_trip_and_errors(tmp_path):
    local = HardwareProfile("local", peak_tflops=12.3, eta=0.02, source="measured", role="ue")
    save_profile(local, tmp_path / "local.json")
    assert load_profile(tmp_path / "local.json") == local
    save_profile(PROFILES["a40"], tmp_path / "a40.json")
    assert load_profile(tmp_path / "a40.json") == PROFILES["a40"]
    (tmp_path / "bad.json").write_text(json.dumps({"name": "x", "eta": 0.1, "source": "s", "oops": 1}))
    with pytest.raises(ValueError, match="peak_tflops.*oops"):
        load_profile(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_profile(tmp_path / "junk.json")
    with pytest.raises(ValueError, match="jetson-agx-orin"):
        get_profile("tpu")
