"""load_pair: the built-in pair, local directories, and clear errors for bad paths or mismatched vocabularies."""
import json

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from wisv.models.loader import BUILTIN_DIR, PairError, load_pair


def save_tiny(path, tokenizer, hidden=16):
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=2, intermediate_size=32)
    LlamaForCausalLM(cfg).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(BUILTIN_DIR / "tokenizer")


def test_builtin_pair_loads():
    drafter, target, tokenizer = load_pair()
    assert drafter.config.vocab_size == target.config.vocab_size == len(tokenizer)
    assert target.num_parameters() > 3 * drafter.num_parameters()
    assert drafter.dtype == target.dtype == torch.float32  # fp16 on disk, fp32 for CPU compute
    assert not target.training


def test_local_dirs_load(tmp_path, tok):
    d = save_tiny(tmp_path / "d", tok, 16)
    t = save_tiny(tmp_path / "t", tok, 32)
    drafter, target, _ = load_pair(d, t, dtype=torch.float64)
    assert drafter.config.hidden_size == 16 and target.config.hidden_size == 32
    assert target.dtype == torch.float64


def test_vocab_mismatch_is_refused(tmp_path, tok):
    other = AutoTokenizer.from_pretrained(BUILTIN_DIR / "tokenizer")
    other.add_tokens(["<extra-token>"])
    d = save_tiny(tmp_path / "d", other)
    t = save_tiny(tmp_path / "t", tok)
    with pytest.raises(PairError, match="vocabularies differ: 638 vs 637 tokens, 1 only in drafter"):
        load_pair(d, t)


def test_missing_path(tmp_path):
    with pytest.raises(PairError, match="drafter path .*nope.* does not exist"):
        load_pair(tmp_path / "nope", None)


def test_not_a_model_dir(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PairError, match="target path .* is not a HuggingFace model directory"):
        load_pair(None, tmp_path / "empty")


def test_not_a_causal_lm(tmp_path):
    (tmp_path / "vit").mkdir()
    (tmp_path / "vit" / "config.json").write_text(json.dumps({"model_type": "vit"}))
    with pytest.raises(PairError, match="'vit' model, which is not a causal LM"):
        load_pair(tmp_path / "vit", None)


def test_resolve_dtype_names_a_torch_dtype_and_auto_is_the_device_default():
    from wisv.models.loader import resolve_dtype
    assert resolve_dtype("auto", "cpu") == torch.float32 and resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    with pytest.raises(ValueError, match="expected one of"):
        resolve_dtype("int8", "cpu")
