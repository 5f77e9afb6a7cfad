"""Shared testbed fixtures: a tiny random drafter/target pair saved as HF directories with the built-in tokenizer."""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from tests.tiny_pair import make_pair

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_DIR = ROOT / "wisv" / "assets" / "toy-pair" / "tokenizer"


@dataclass(frozen=True)
class PairDirs:
    """Local HF directories of the tiny pair (model + tokenizer in each)."""

    drafter: Path
    target: Path
    vocab_size: int  # = len(tokenizer)
    eos: int  # tokenizer's EOS id, also the models' EOS


@pytest.fixture(scope="session")
def pair_dirs(tmp_path_factory: pytest.TempPathFactory) -> PairDirs:
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    drafter, target = make_pair(vocab=len(tok), eos=tok.eos_token_id, bos=tok.bos_token_id, pad=tok.pad_token_id)
    root = tmp_path_factory.mktemp("tiny-pair")
    for name, model in (("drafter", drafter), ("target", target)):
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return PairDirs(root / "drafter", root / "target", len(tok), tok.eos_token_id)


@pytest.fixture(scope="session", autouse=True)
def child_env() -> Iterator[None]:
    """Child processes (``python -m testbed.*``) find the repo and use one thread each, wherever pytest runs."""
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        mp.setenv("OMP_NUM_THREADS", "1")
        yield
