"""bench_scale's pure parts: the named shapes, their HF configs and parameter counts, the per-round payload model
against measured bytes, the memory check and the table (the benchmark itself runs real processes: not a test)."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from scripts.bench import scale as bench_scale
from scripts.gpucheck.scale_shapes import (
    LLAMA_1B,
    LLAMA_8B,
    PAIRS,
    QWEN_05B,
    QWEN_15B,
    compare_bytes,
    hf_config,
    model_round_bits,
    param_count,
    random_prompts,
)
from wisv.timing.latency import PayloadBits

PUBLISHED = {LLAMA_1B: 1.236e9, LLAMA_8B: 8.030e9, QWEN_05B: 0.494e9, QWEN_15B: 1.544e9}  # their model cards
TINY = {"llama": replace(LLAMA_8B, vocab=300, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=96),
        "qwen2": replace(QWEN_05B, vocab=300, hidden=48, layers=2, heads=4, kv_heads=2, intermediate=80)}
PB = PayloadBits(b_tok=32, b_h=16, b_idx=32, d_d=4, vocab=10, o_up=80, o_dn=40)  # s_h = 64, s_fb = 64


@pytest.mark.parametrize("shape", list(PUBLISHED), ids=lambda s: s.name)
def test_the_named_shapes_have_their_published_sizes(shape):
    assert param_count(shape) == pytest.approx(PUBLISHED[shape], rel=2e-3)
    assert shape.hidden % shape.heads == 0 and shape.heads % shape.kv_heads == 0


@pytest.mark.parametrize("kind", list(TINY))
def test_hf_config_builds_the_model_param_count_predicts(kind):
    shape = TINY[kind]
    cfg = AutoConfig.for_model(shape.model_type, **hf_config(shape))
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    assert sum(p.numel() for p in model.parameters()) == param_count(shape)
    assert (cfg.vocab_size, cfg.num_key_value_heads, cfg.tie_word_embeddings) == (300, 2, shape.tied)
    assert cfg.eos_token_id == shape.eos


def test_the_pairs_share_a_vocabulary_and_a_model_type():
    for drafter, target in PAIRS.values():
        assert drafter.vocab == target.vocab and drafter.model_type == target.model_type
        assert param_count(drafter) < param_count(target)


def test_model_round_bits_per_protocol():
    assert model_round_bits("greedy", 2, 0, PB) == (2 * 32 + 80, 64 + 40)
    assert model_round_bits("fh", 2, 0, PB) == (2 * 32 + 2 * 64 + 80, 64 + 40)
    assert model_round_bits("reject", 2, 0, PB) == (2 * 32 + 2 * 10 * 16 + 80, 64 + 40)
    assert model_round_bits("sh", 2, 0, PB) == (2 * 32 + 80, 64 + 40)  # no mismatch: one exchange
    assert model_round_bits("sh", 2, 1, PB) == (2 * 32 + 80 + 64 + 80, 64 + 40 + 32 + 40)  # + HIDDEN_REQ, HIDDEN


def _rounds(protocol: str, pb: PayloadBits, k: int, queried: list[int], scale: float = 1.0) -> pd.DataFrame:
    bits = [model_round_bits(protocol, k, m, pb) for m in queried]
    return pd.DataFrame({"drafted": [k] * len(queried), "queried": queried,
                         "uplink_bytes": [scale * u / 8 for u, _ in bits], "downlink_bytes": [d / 8 for _, d in bits]})


def test_compare_bytes_ratios_are_measured_over_model(monkeypatch):
    monkeypatch.setattr("scripts.gpucheck.scale_shapes.wire_payload_bits", lambda d_d, vocab, k: PB)
    same = compare_bytes("sh", _rounds("sh", PB, 2, [0, 1, 3]), 4, 10, 2)
    assert same["up_ratio"] == pytest.approx(1.0) and same["down_ratio"] == pytest.approx(1.0)
    assert same["queried_per_round"] == pytest.approx(4 / 3) and same["rounds"] == 3
    double = compare_bytes("fh", _rounds("fh", PB, 2, [0, 0], scale=2.0), 4, 10, 2)
    assert double["up_ratio"] == pytest.approx(2.0) and double["up_bytes_per_drafted_token"] == pytest.approx(
        2 * (2 * 32 + 2 * 64 + 80) / 8 / 2)


def test_reject_at_llama3s_vocabulary_is_about_256_kb_per_drafted_token():
    k, vocab = 8, LLAMA_8B.vocab
    rounds = pd.DataFrame({"drafted": [k], "queried": [0], "uplink_bytes": [k * vocab * 2 + 400],
                           "downlink_bytes": [150]})
    got = compare_bytes("reject", rounds, LLAMA_1B.hidden, vocab, k)
    assert got["up_bytes_per_drafted_token"] == pytest.approx(256.5e3, rel=1e-3)
    assert got["up_ratio"] == pytest.approx(1.0, abs=1e-3)
    assert got["up_bytes_model_paper"] < got["up_bytes_model"]  # 17-bit ids, no overheads


def test_random_prompts_are_seeded_ordinary_tokens():
    rows = random_prompts(3, 5, QWEN_05B.vocab, seed=1)
    assert rows == random_prompts(3, 5, QWEN_05B.vocab, seed=1) != random_prompts(3, 5, QWEN_05B.vocab, seed=2)
    assert all(1000 <= t < 100000 for r in rows for t in r["prompt_ids"]) and len(rows[0]["prompt_ids"]) == 5


def test_a_pair_that_does_not_fit_is_refused(monkeypatch):
    monkeypatch.setattr(bench_scale.psutil, "virtual_memory", lambda: SimpleNamespace(available=4e9))
    with pytest.raises(SystemExit, match="needs about"):
        bench_scale.check_memory(bench_scale.ScaleBenchConfig(shapes="llama"))
    monkeypatch.setattr(bench_scale.psutil, "virtual_memory", lambda: SimpleNamespace(available=20e9))
    got = bench_scale.check_memory(bench_scale.ScaleBenchConfig(shapes="qwen", dtype="float16", protocols=["greedy"]))
    assert got["needed_gb"] == pytest.approx(2 * (0.494 + 2 * 1.544), rel=2e-3)


def test_the_table_has_a_line_per_protocol():
    r = {"protocol": "fh", "bytes": {"drafted_per_round": 8, "queried_per_round": 0, "up_bytes_measured": 100.0,
                                    "up_bytes_model": 90.0, "up_ratio": 1.1, "down_bytes_measured": 10.0,
                                    "down_bytes_model": 10.0, "down_ratio": 1.0, "up_bytes_per_drafted_token": 12.5},
         "t_verify_ms_per_round": 3.0, "peak_rss_mb": {"edge": 1.0, "ue": 2.0}, "summary": {"matches_target": 1.0}}
    text = bench_scale.table([r, r | {"protocol": "sh"}])
    assert len(text.splitlines()) == 3 and "up_ratio" in text and " sh " in text
