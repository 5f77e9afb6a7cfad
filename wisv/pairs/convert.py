"""Convert the SmolLM2 GGUF to a plain HF Llama directory (dequantized fp32 weights, tokenizer and chat template)."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from wisv.pairs.fetch import sha256_file

STAMP = "converted.json"  # written last in a converted directory: the weights file's sha256


def _plain_config(cfg: LlamaConfig) -> LlamaConfig:
    """The GGUF model's config without its quantization marker (which blocks save_pretrained)."""
    d = cfg.to_dict()
    d.pop("quantization_config", None)
    d.pop("_name_or_path", None)
    d["dtype"] = "float32"
    return LlamaConfig(**d)


def is_converted(out_dir: Path) -> bool:
    """True when ``out_dir`` holds a finished conversion whose weights still match their recorded sha256."""
    stamp = out_dir / STAMP
    if not stamp.is_file():
        return False
    rec = json.loads(stamp.read_text())
    return all((out_dir / f).is_file() and sha256_file(out_dir / f) == h for f, h in rec["sha256"].items())


def stamp_dir(out_dir: Path, **facts) -> None:
    """Record the sha256 of every safetensors file (and ``facts``) as the directory's finished mark."""
    hashes = {p.name: sha256_file(p) for p in sorted(out_dir.glob("*.safetensors"))}
    (out_dir / STAMP).write_text(json.dumps({"sha256": hashes, **facts}, indent=1) + "\n")


def convert_gguf(gguf: Path, out_dir: Path) -> Path:
    """Write the target's HF directory from the GGUF unless an intact one is there; returns ``out_dir``."""
    if is_converted(out_dir):
        print(f"[target] already converted: {out_dir}")
        return out_dir
    print(f"[target] loading {gguf.name} (dequantizing)", flush=True)
    src = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = LlamaForCausalLM(_plain_config(src.config))
    missing, unexpected = model.load_state_dict(src.state_dict(), strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise RuntimeError(f"GGUF state dict does not fit LlamaForCausalLM: missing {missing}, extra {unexpected}")
    model.tie_weights()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.eval().save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    stamp_dir(out_dir, source=gguf.name)
    print(f"[target] wrote {out_dir}")
    return out_dir
