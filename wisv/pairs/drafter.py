"""The SmolLM2 pair's early-exit drafter: some of the target's layers, its final norm and LM head (restricted to the
spec's ``head_vocab``), with the distilled weights shipped in ``wisv/assets/smollm2-drafter`` laid over them."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, LlamaForCausalLM

from wisv.models.restricted_head import restrict, save_model
from wisv.pairs.convert import is_converted, stamp_dir
from wisv.pairs.fetch import sha256_file

ASSET_DIR = Path(__file__).resolve().parents[1] / "assets" / "smollm2-drafter"
DRAFTERS = {"drafter": ASSET_DIR,  # the default: distilled on the broad task suite's seen kinds (issue 43)
            "drafter-geo": ASSET_DIR.with_name("smollm2-drafter-geo")}  # the earlier one: long-form geography templates
# Each is built into <pair dir>/<name>/ (``--drafter <pair dir>/drafter-geo`` picks the earlier one); docs/pairs.md.
SPEC_FILE = "drafter.json"  # {"layers": [...], "weights": file, "weights_sha256": hex, "head_vocab": [ids] or absent}
BUILD_FORMAT = 2  # stamped into a built drafter; bump to rebuild existing ones (2: head_vocab is a RestrictedHead)


def early_exit(target: LlamaForCausalLM, layers: list[int]) -> LlamaForCausalLM:
    """A Llama with the target's embedding, the given decoder layers (copied, in order), final norm and LM head."""
    cfg = copy.deepcopy(target.config)
    cfg.num_hidden_layers = len(layers)
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = [cfg.layer_types[i] for i in layers]
    model = LlamaForCausalLM(cfg)
    sd = {k: v for k, v in target.state_dict().items() if ".layers." not in k}
    for new, old in enumerate(layers):
        prefix = f"model.layers.{old}."
        sd |= {f"model.layers.{new}." + k[len(prefix):]: v for k, v in target.state_dict().items()
               if k.startswith(prefix)}
    model.load_state_dict(sd, strict=False)
    model.tie_weights()
    return model.eval()


def read_spec(asset_dir: Path = ASSET_DIR) -> dict:
    """The shipped drafter's spec; a clear error if it is missing."""
    path = asset_dir / SPEC_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: train the drafter with scripts/train/smollm2_drafter.py")
    return json.loads(path.read_text())


def apply_weights(model: LlamaForCausalLM, weights: Path, sha256: str | None = None) -> None:
    """Overwrite the model's tensors named in ``weights`` (safetensors, any dtype) after checking its sha256."""
    if sha256 is not None and sha256_file(weights) != sha256:
        raise RuntimeError(f"{weights}: sha256 differs from the spec's {sha256}")
    trained = load_file(str(weights))
    own = model.state_dict()
    unknown = sorted(set(trained) - set(own))
    if unknown:
        raise RuntimeError(f"{weights}: tensors the drafter does not have: {unknown[:5]}")
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in trained.items()}, strict=False)


def build_drafter(target_dir: Path, out_dir: Path, asset_dir: Path = ASSET_DIR) -> Path:
    """Write the drafter's HF directory (with the target's tokenizer) unless an intact one for this spec is there."""
    spec = read_spec(asset_dir)
    if is_converted(out_dir) and _stamp(out_dir) == {"spec": spec, "build_format": BUILD_FORMAT}:
        print(f"[drafter] already built: {out_dir}")
        return out_dir
    print(f"[drafter] target layers {spec['layers']} + {spec.get('weights') or 'no trained weights'}", flush=True)
    target = LlamaForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    model = early_exit(target, spec["layers"])
    if spec.get("weights"):
        apply_weights(model, asset_dir / spec["weights"], spec.get("weights_sha256"))
    if spec.get("head_vocab"):
        restrict(model, spec["head_vocab"])
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.safetensors"):  # a rebuild must not keep an earlier build's files
        stale.unlink()
    save_model(model, out_dir)
    AutoTokenizer.from_pretrained(target_dir).save_pretrained(out_dir)
    stamp_dir(out_dir, spec=spec, build_format=BUILD_FORMAT)
    print(f"[drafter] wrote {out_dir}")
    return out_dir


def _stamp(out_dir: Path) -> dict:
    """The spec and build format a built drafter directory was stamped with."""
    rec = json.loads((out_dir / "converted.json").read_text())
    return {"spec": rec.get("spec"), "build_format": rec.get("build_format")}
