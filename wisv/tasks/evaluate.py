"""Shared evaluation helpers: target-only greedy reference, accuracy, recall/FPR, mismatch kinds."""
from __future__ import annotations

import torch
from transformers import GenerationConfig, PreTrainedModel

from wisv.tasks.prompts import encode_prompt  # noqa: F401 - the one prompt encoder lives in wisv.tasks.prompts; older imports
from wisv.tasks.qa import accuracy  # noqa: F401 - the one accuracy (toy ``#### N`` or QA answers) lives in wisv.tasks.qa

MAX_NEW_TOKENS = 160  # toy solutions are at most ~110 tokens


def eos_id(model: PreTrainedModel) -> int | None:
    """The model's (first) EOS token id."""
    eos = model.generation_config.eos_token_id
    return eos[0] if isinstance(eos, list) else eos


@torch.no_grad()
def greedy_reference(model: PreTrainedModel, prompt_ids: list[int], max_new_tokens: int = MAX_NEW_TOKENS) -> list[int]:
    """New tokens of ``model.generate(do_sample=False)``: the output lossless SD must reproduce."""
    x = torch.tensor([prompt_ids], dtype=torch.long, device=model.device)
    cfg = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos_id(model),
                           pad_token_id=model.generation_config.pad_token_id)
    out = model.generate(x, attention_mask=torch.ones_like(x), generation_config=cfg)
    return out[0, len(prompt_ids):].tolist()


def recall_fpr(flag: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """Recall on the positive class (y == 1) and false-positive rate on the negative one (nan if a class is absent)."""
    pos, neg = y == 1, y == 0
    return (float(flag[pos].float().mean()) if pos.any() else float("nan"),
            float(flag[neg].float().mean()) if neg.any() else float("nan"))


def token_kind(tokenizer, token_id: int) -> str:
    """'digit' if the token is a digit, else 'word' (used for mismatch breakdowns)."""
    s = tokenizer.decode([token_id]).strip()
    return "digit" if s.isdigit() else "word"


def mismatch_kind(tokenizer, draft_id: int, target_id: int) -> str:
    """Breakdown label of a mismatch: 'word-word', 'digit-word' or 'digit-digit'."""
    kinds = sorted((token_kind(tokenizer, draft_id), token_kind(tokenizer, target_id)))
    return "-".join(kinds)
