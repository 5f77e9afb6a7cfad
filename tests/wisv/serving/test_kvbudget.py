"""KV budget estimates: the formula, a model's shape, the positions a pass allocates, and the reservation ledger."""
import pytest
import torch

from tests.tiny_pair import make_pair
from wisv.decoding.sessions import VerifySession
from wisv.serving.batchverify import pass_tokens
from wisv.serving.kvbudget import MB, KVBudgetError, KVLedger, KVShape, refusal, session_tokens


def test_bytes_for_is_keys_and_values_of_every_layer():
    shape = KVShape(layers=30, kv_heads=3, head_dim=64, dtype_bytes=2)
    assert shape.bytes_for(1) == 2 * 30 * 3 * 64 * 2
    assert shape.bytes_for(100) == 100 * shape.bytes_for(1) and shape.bytes_for(-5) == 0
    assert session_tokens(prompt_len=50, max_new_tokens=128, draft_len=8) == 186


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_a_models_shape_predicts_its_cache(family):
    _, target = make_pair(family, vocab=61, eos=60)
    shape = KVShape.of(target)
    assert shape.dtype_bytes == torch.finfo(target.dtype).bits // 8
    sess = VerifySession(target, [3, 4, 5, 6, 7])
    sess.verify([1, 2, 3])  # the prefill covers 4 positions, the pass adds 4
    held = sum(t.untyped_storage().nbytes() for layer in sess.cache.layers for t in (layer.keys, layer.values))
    assert held == shape.bytes_for(8)


def test_pass_tokens_alone_and_batched():
    assert pass_tokens([(10, 9, 4)]) == 14  # alone: the grown cache, prompt and draft
    assert pass_tokens([(10, 9, 4), (6, 5, 2)]) == 2 * (9 + 5)  # warm rows: B x (C_max + N_max), N = 1 + K
    assert pass_tokens([(10, 0, 4), (6, 5, 2)]) == 9 + 2 * (9 + 5)  # a cold row is prefilled first


def test_refusal_names_the_need_and_the_budget():
    assert refusal(MB, MB, 2.0, "x") is None
    err = refusal(3 * MB, MB, 2.0, "session 's1'")
    assert isinstance(err, KVBudgetError) and err.code == "kv_budget"
    assert str(err) == ("session 's1' needs 3.0 MB of KV cache on top of 1.0 MB held; "
                        "this edge's --memory-budget-mb is 2")


def test_ledger_admits_while_the_reservations_fit():
    led = KVLedger(budget_mb=3.0)
    led.reserve("a", 2 * MB, "a")
    with pytest.raises(KVBudgetError, match="on top of 2.0 MB held"):
        led.reserve("b", 2 * MB, "b")
    led.reserve("a", 3 * MB, "a")  # a session's own reservation is replaced, not added
    with pytest.raises(KVBudgetError):
        led.check(1, "a reference")
    led.release("a")
    led.reserve("b", 2 * MB, "b")
    assert led.total == 2 * MB
