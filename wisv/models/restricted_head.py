"""A restricted LM head: logits for a kept subset of the vocabulary (a small matmul), every other id masked, and its
save/attach round trip through a model directory (``restricted_head.safetensors`` beside the model's weights)."""
from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

HEAD_FILE = "restricted_head.safetensors"  # in a model directory: its presence makes the loader attach the head
MASK_LOGIT = -1.0e4  # logit of an excluded id: finite (p*log p stays 0, no NaN), in range for fp16/bf16, and
#   exp(MASK_LOGIT - max) is exactly 0 in every float dtype at temperature 1


class RestrictedHead(nn.Module):
    """``Linear(hidden, n_kept)`` over the kept ids, scattered into full-vocabulary logits filled with MASK_LOGIT."""

    def __init__(self, weight: torch.Tensor, kept_ids: torch.Tensor, vocab_size: int):
        super().__init__()
        ids = torch.as_tensor(kept_ids, dtype=torch.long).flatten()
        if weight.dim() != 2 or weight.shape[0] != ids.numel():
            raise ValueError(f"restricted head: weight {tuple(weight.shape)} does not match {ids.numel()} kept ids")
        if (ids.numel() == 0 or int(ids.min()) < 0 or int(ids.max()) >= vocab_size
                or ids.unique().numel() != ids.numel()):
            raise ValueError(f"restricted head: kept ids must be distinct and in [0, {vocab_size})")
        self.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.register_buffer("kept_ids", ids.clone())
        self.vocab_size = int(vocab_size)

    @property
    def in_features(self) -> int:
        return int(self.weight.shape[1])

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., hidden] -> [..., vocab_size] logits: the kept columns computed, the rest MASK_LOGIT."""
        kept = nn.functional.linear(hidden, self.weight)
        out = kept.new_full((*kept.shape[:-1], self.vocab_size), MASK_LOGIT)
        return out.index_copy_(-1, self.kept_ids, kept)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, kept={self.weight.shape[0]}, vocab_size={self.vocab_size}"


def restrict(model: nn.Module, kept_ids: list[int] | torch.Tensor) -> RestrictedHead:
    """Replace the model's LM head by a RestrictedHead over ``kept_ids`` (rows of its current head); returns it."""
    ids = torch.as_tensor(kept_ids, dtype=torch.long)
    full = model.get_output_embeddings().weight
    head = RestrictedHead(full.detach()[ids.to(full.device)], ids, full.shape[0]).to(full.device)
    return attach(model, head)


def attach(model: nn.Module, head: RestrictedHead) -> RestrictedHead:
    """Set ``head`` as the model's LM head, untied (so that no later tie_weights overwrites it)."""
    model.config.tie_word_embeddings = False
    model.set_output_embeddings(head)
    return head


def save_head(head: RestrictedHead, model_dir: Path) -> Path:
    """Write the head's weight and kept ids to ``model_dir/HEAD_FILE``."""
    path = Path(model_dir) / HEAD_FILE
    save_file({"weight": head.weight.detach().float().cpu().contiguous(), "kept_ids": head.kept_ids.cpu()},
              str(path), metadata={"vocab_size": str(head.vocab_size)})
    return path


def save_model(model: nn.Module, out_dir: Path) -> None:
    """``save_pretrained`` that keeps a RestrictedHead: the model is written with its head tied to the input
    embedding (a plain HF load gets the full head) and the restricted head goes to HEAD_FILE beside it."""
    head = model.get_output_embeddings()
    if not isinstance(head, RestrictedHead):
        model.save_pretrained(out_dir)
        return
    emb = model.get_input_embeddings().weight
    plain = nn.Linear(emb.shape[1], emb.shape[0], bias=False, device=emb.device, dtype=emb.dtype)
    plain.weight = emb
    model.set_output_embeddings(plain)
    model.config.tie_word_embeddings = True
    try:
        model.save_pretrained(out_dir)
    finally:
        attach(model, head)
    save_head(head, out_dir)


def load_head(model: nn.Module, model_dir: Path) -> RestrictedHead | None:
    """Attach the head saved in ``model_dir`` (None, model unchanged, when the directory holds none)."""
    path = Path(model_dir) / HEAD_FILE
    if not path.is_file():
        return None
    tensors = load_file(str(path))
    full = model.get_output_embeddings().weight
    head = RestrictedHead(tensors["weight"].to(full.dtype), tensors["kept_ids"], int(model.config.vocab_size))
    return attach(model, head.to(full.device))
