"""Load a drafter/target pair with their shared tokenizer: the built-in toy pair or local HF directories."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import NamedTuple

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from wisv.models.choices import DTYPE_CHOICES  # noqa: F401 - re-exported: --dtype's choices
from wisv.models.restricted_head import load_head

BUILTIN_DIR = Path(__file__).resolve().parents[1] / "assets" / "toy-pair"


class PairError(ValueError):
    """A model directory or a drafter/target pairing that cannot be used."""


class ModelPair(NamedTuple):
    """Drafter, target and the tokenizer they share."""

    drafter: PreTrainedModel
    target: PreTrainedModel
    tokenizer: object  # a transformers tokenizer


def builtin_paths() -> tuple[Path, Path]:
    """Directories of the built-in drafter and target."""
    return BUILTIN_DIR / "drafter", BUILTIN_DIR / "target"


def default_dtype(device: str) -> torch.dtype:
    """float32 on CPU (fp16 matrix products, a prefill's, are slow there; a one-token step is not: a drafter's may
    take ``--drafter-dtype float16``, docs/pairs.md); bf16 or fp16 on CUDA."""
    if str(device).startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def resolve_dtype(name: str, device: str) -> torch.dtype:
    """The torch dtype a ``--dtype`` choice names on ``device`` (``auto``: ``default_dtype(device)``)."""
    if name not in DTYPE_CHOICES:
        raise ValueError(f"dtype {name!r}: expected one of {DTYPE_CHOICES}")
    return default_dtype(device) if name == "auto" else getattr(torch, name)


def check_model_dir(path: Path, role: str) -> None:
    """Raise PairError unless ``path`` is a local HF directory holding a causal LM."""
    if not path.exists():
        raise PairError(f"{role} path {str(path)!r} does not exist")
    if not path.is_dir() or not (path / "config.json").is_file():
        raise PairError(f"{role} path {str(path)!r} is not a HuggingFace model directory (no config.json)")
    try:
        cfg = AutoConfig.from_pretrained(path)
    except (OSError, ValueError, KeyError) as e:
        raise PairError(f"{role} path {str(path)!r}: cannot read config.json ({e})") from e
    if cfg.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise PairError(f"{role} path {str(path)!r} holds a {cfg.model_type!r} model, which is not a causal LM")


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")  # any of them: a tokenizer dir


def has_tokenizer(path: Path) -> bool:
    """True when the model directory also holds a tokenizer."""
    return any((Path(path) / f).exists() for f in TOKENIZER_FILES)


def load_tokenizer(path: Path, role: str):
    """The tokenizer saved in a model directory, or None when it holds none."""
    return _load_tokenizer(Path(path), role) if has_tokenizer(path) else None


def _load_tokenizer(path: Path, role: str):
    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, TypeError) as e:
        raise PairError(f"{role} path {str(path)!r}: no usable tokenizer ({e})") from e


def vocab_hash(tok) -> str | None:
    """sha256 (hex) of a tokenizer's vocabulary as its sorted (token, id) pairs, JSON-encoded one per line; None
    for no tokenizer.  Two tokenizers with one hash give every token the same id."""
    if tok is None:
        return None
    h = hashlib.sha256()
    for token, i in sorted(tok.get_vocab().items()):
        h.update(json.dumps([token, int(i)]).encode() + b"\n")
    return h.hexdigest()


def vocab_facts(model: PreTrainedModel, tok) -> tuple[int, str | None]:
    """(size, hash) of the vocabulary a model's side declares at OPEN: the tokenizer's when there is one, else the
    model's config vocab_size and no hash (then only the sizes can be compared)."""
    return (len(tok), vocab_hash(tok)) if tok is not None else (int(model.config.vocab_size), None)


def check_same_vocab(drafter_tok, target_tok) -> None:
    """Refuse tokenizers whose vocabularies differ: token IDs must mean the same on both sides."""
    dv, tv = drafter_tok.get_vocab(), target_tok.get_vocab()
    if dv != tv:
        only_d = len(set(dv) - set(tv))
        only_t = len(set(tv) - set(dv))
        moved = sum(1 for k in set(dv) & set(tv) if dv[k] != tv[k])
        raise PairError(f"drafter and target vocabularies differ: {len(dv)} vs {len(tv)} tokens, "
                        f"{only_d} only in drafter, {only_t} only in target, {moved} with different IDs")


RANDOM_WEIGHTS_FILE = "random_weights.json"  # {"seed": N} beside config.json: weights drawn, not read


def load_model(path: Path, role: str, device: str, dtype: torch.dtype) -> PreTrainedModel:
    """Load one causal LM in eval mode, with the restricted LM head its directory saves, if any; a directory with
    ``random_weights.json`` instead of weights gets seeded random weights built in memory (``random_model``)."""
    check_model_dir(path, role)
    if (Path(path) / RANDOM_WEIGHTS_FILE).is_file():
        return random_model(Path(path), device, dtype).eval()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    load_head(model, path)
    return model.to(device).eval()


def random_model(path: Path, device: str, dtype: torch.dtype) -> PreTrainedModel:
    """The directory's config.json with the seeded random weights of transformers' own init, built on ``device``
    (no weight file read or written): the same seed, device and dtype give the same weights in every process."""
    try:
        seed = int(json.loads((path / RANDOM_WEIGHTS_FILE).read_text())["seed"])
    except (ValueError, KeyError, TypeError) as e:
        raise PairError(f"{path / RANDOM_WEIGHTS_FILE}: expected {{\"seed\": INT}} ({e})") from e
    torch.manual_seed(seed)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), dtype=dtype)


def load_pair(drafter: str | Path | None = None, target: str | Path | None = None,
              device: str = "cpu", dtype: torch.dtype | None = None) -> ModelPair:
    """Load (drafter, target, tokenizer).  ``None`` means the built-in toy pair's model."""
    d_default, t_default = builtin_paths()
    d_path = Path(drafter) if drafter is not None else d_default
    t_path = Path(target) if target is not None else t_default
    check_model_dir(d_path, "drafter")
    check_model_dir(t_path, "target")
    tok = _load_tokenizer(t_path, "target")
    if has_tokenizer(d_path):
        check_same_vocab(_load_tokenizer(d_path, "drafter"), tok)
    dtype = dtype or default_dtype(device)
    return ModelPair(load_model(d_path, "drafter", device, dtype), load_model(t_path, "target", device, dtype), tok)
