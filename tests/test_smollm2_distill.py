"""The SmolLM2 drafter's distillation data: QA prompts held apart from the test split, and the top-k soft targets."""
from __future__ import annotations

import json

import torch

from scripts.data.smollm2_qa_distill_prompts import qa_distill_prompts
from scripts.train.smollm2_drafter import DistillConfig, label_vocab, next_token_labels, soft_targets
from wisv.tasks.qa import QA_DIR


def _prompts(split: str) -> set[str]:
    return {json.loads(x)["prompt"] for x in (QA_DIR / f"{split}.jsonl").read_text().splitlines() if x.strip()}


def test_qa_distill_prompts_exclude_the_test_split_and_hold_calib():
    pool = qa_distill_prompts(1234)
    assert len(pool) == len(set(pool)) > 400
    assert not set(pool) & _prompts("test")
    assert _prompts("calib") <= set(pool)
    assert pool == qa_distill_prompts(1234) and pool != qa_distill_prompts(7)


def test_soft_targets_sit_at_the_generated_positions_inside_the_vocab():
    vocab = torch.tensor([3, 5, 9])
    seq, n = [1, 2, 5, 9], 2  # prompt [1, 2], generated [5, 9]
    row = {"ids": seq, "labels": next_token_labels(seq, n), "prompt_len": n,
           "top_ids": [[5, 3, 7], [9, 5, 3]], "top_logits": [[2.0, 1.0, 0.5], [1.0, 1.0, -30.0]]}
    p = soft_targets([row], 5, vocab, DistillConfig().temperature)
    assert row["labels"] == [-1, 5, 9, -1]
    assert p[0, 0].sum() == 0 and p[0, 3:].sum() == 0  # prompt position and beyond the generation: none
    torch.testing.assert_close(p[0, 1:3].sum(-1), torch.ones(2))  # token 7 (outside the vocab) renormalised away
    assert p[0, 1].argmax() == 1 and p[0, 1, 0] > 0 and p[0, 1, 2] == 0
    torch.testing.assert_close(p[0, 2, 1], p[0, 2, 2])
    assert soft_targets([row | {"top_ids": [], "top_logits": []}], 5, vocab, 1.0).sum() == 0


def test_the_head_vocabulary_holds_the_labels_and_optionally_the_top_k():
    seq, n = [1, 2, 5, 9], 2
    row = {"ids": seq, "labels": next_token_labels(seq, n), "prompt_len": n, "top_ids": [[5, 3], [9, 7]],
           "top_logits": [[1.0, 0.5], [1.0, 0.2]]}
    assert label_vocab([row]).tolist() == [5, 9]
    assert label_vocab([row], top_k=True).tolist() == [3, 5, 7, 9]
    assert label_vocab([row], min_ids=2, top_k=True).tolist() == [0, 1, 3, 5, 7, 9]
