"""RestrictedHead: masked full-vocabulary logits, argmax inside the kept set, lossless greedy SD with it, and the
loader's save/attach round trip (a directory without the head file loads a plain model)."""
import pytest
import torch

from tests.tiny_pair import make_pair
from wisv.decoding.speculative import speculative_generate
from wisv.models.loader import load_model
from wisv.models.restricted_head import HEAD_FILE, MASK_LOGIT, RestrictedHead, restrict, save_model
from wisv.tasks.evaluate import greedy_reference

KEPT = [1, 3, 4, 9, 17, 22, 30, 41, 52, 60]  # includes the tiny pair's EOS (60)


def _restricted_drafter():
    drafter, target = make_pair()
    restrict(drafter, KEPT)
    return drafter, target


def _outside(vocab: int) -> torch.Tensor:
    mask = torch.ones(vocab, dtype=torch.bool)
    mask[KEPT] = False
    return mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_logits_outside_the_kept_set_are_masked_and_get_zero_probability(dtype):
    drafter, _ = _restricted_drafter()
    drafter.to(dtype)
    x = torch.tensor([[2, 5, 7, 11, 13]])
    with torch.no_grad():
        out = drafter(x, output_hidden_states=True)
    out_ids = _outside(61)
    assert out.logits.shape == (1, 5, 61) and out.logits.dtype == dtype
    assert (out.logits[..., out_ids] == torch.tensor(MASK_LOGIT, dtype=dtype)).all()
    head = drafter.lm_head
    assert torch.allclose(out.logits[..., KEPT], out.hidden_states[-1] @ head.weight.T)
    for logits in (out.logits.float(), out.logits.double(), out.logits):
        p = torch.softmax(logits, -1)
        assert (p[..., out_ids] == 0).all() and torch.allclose(p.sum(-1).double(), torch.ones(1, 5).double(), atol=1e-2)
        assert torch.isfinite(p * torch.log_softmax(logits, -1)).all()


def test_argmax_never_leaves_the_kept_set_even_when_every_kept_logit_is_negative():
    head = RestrictedHead(-torch.ones(3, 4), torch.tensor([2, 5, 7]), 10)
    logits = head(torch.rand(6, 4) + 0.1)  # every kept logit < 0 (a zeroed row would win with 0)
    assert (logits[:, [2, 5, 7]] < 0).all()
    assert set(logits.argmax(-1).tolist()) <= {2, 5, 7}


def test_bad_kept_ids_are_refused():
    with pytest.raises(ValueError, match="distinct"):
        RestrictedHead(torch.ones(2, 4), torch.tensor([3, 3]), 10)
    with pytest.raises(ValueError, match="distinct"):
        RestrictedHead(torch.ones(1, 4), torch.tensor([10]), 10)
    with pytest.raises(ValueError, match="does not match"):
        RestrictedHead(torch.ones(3, 4), torch.tensor([1, 2]), 10)


def test_kept_ids_follow_the_module_to_another_dtype_and_device():
    head = RestrictedHead(torch.ones(2, 4), torch.tensor([1, 5]), 8).to(torch.float16)
    assert head.kept_ids.dtype == torch.long and head.weight.dtype == torch.float16
    assert "kept_ids" in dict(head.named_buffers())


@pytest.mark.parametrize("k", [1, 3, 8])
def test_greedy_sd_with_a_restricted_drafter_is_lossless(k):
    drafter, target = _restricted_drafter()
    for prompt in ([3, 4, 5], [9, 1, 22, 7]):
        out = speculative_generate(drafter, target, prompt, max_new_tokens=24, draft_len=k)
        assert out.tokens == greedy_reference(target, prompt, max_new_tokens=24)
        assert all(t in KEPT for r in out.rounds for t in r.draft_tokens)


def test_sampling_q_is_zero_outside_the_kept_set():
    drafter, target = _restricted_drafter()
    gen = torch.Generator().manual_seed(0)
    out = speculative_generate(drafter, target, [3, 4, 5], max_new_tokens=12, draft_len=4, rule="sampling",
                               generator=gen)
    assert all(t in KEPT for r in out.rounds for t in r.draft_tokens)


def test_loader_round_trips_a_restricted_head(tmp_path):
    drafter, _ = _restricted_drafter()
    save_model(drafter, tmp_path / "d")
    assert (tmp_path / "d" / HEAD_FILE).is_file()
    assert isinstance(drafter.lm_head, RestrictedHead)  # saving leaves the live model as it was
    loaded = load_model(tmp_path / "d", "drafter", "cpu", torch.float32)
    assert isinstance(loaded.lm_head, RestrictedHead) and loaded.lm_head.kept_ids.tolist() == KEPT
    x = torch.tensor([[2, 5, 7, 11]])
    with torch.no_grad():
        assert torch.allclose(loaded(x).logits, drafter(x).logits, atol=1e-5)
    half = load_model(tmp_path / "d", "drafter", "cpu", torch.bfloat16)
    assert half.lm_head.weight.dtype == torch.bfloat16


def test_a_directory_without_the_head_file_loads_a_plain_model(tmp_path):
    drafter, _ = make_pair()
    save_model(drafter, tmp_path / "d")
    assert not (tmp_path / "d" / HEAD_FILE).exists()
    loaded = load_model(tmp_path / "d", "drafter", "cpu", torch.float32)
    assert isinstance(loaded.lm_head, torch.nn.Linear) and loaded.lm_head.weight.shape == (61, 32)
    x = torch.tensor([[2, 5, 7, 11]])
    with torch.no_grad():
        assert torch.allclose(loaded(x).logits, drafter(x).logits, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_the_head_follows_the_model_to_cuda_in_bf16():
    drafter, _ = _restricted_drafter()
    drafter.to("cuda", torch.bfloat16)
    assert drafter.lm_head.kept_ids.device.type == "cuda"
    with torch.no_grad():
        logits = drafter(torch.tensor([[2, 5, 7]], device="cuda")).logits
    assert (logits[..., _outside(61).cuda()] == MASK_LOGIT).all()
    assert set(logits.argmax(-1).flatten().tolist()) <= set(KEPT)
