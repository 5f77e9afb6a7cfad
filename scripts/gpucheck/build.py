"""Random-weight models built in memory from a shape's config (no weight file), and the noisy-head drafter."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

from scripts.gpucheck.scale_shapes import Shape, hf_config
from wisv.models.loader import RANDOM_WEIGHTS_FILE, load_model


def write_random_dir(shape: Shape, path: Path, seed: int) -> Path:
    """A model directory of ``shape``: config.json and random_weights.json (the loader draws the weights)."""
    path.mkdir(parents=True, exist_ok=True)
    AutoConfig.for_model(shape.model_type, **hf_config(shape)).save_pretrained(path)
    (path / RANDOM_WEIGHTS_FILE).write_text(json.dumps({"seed": seed}) + "\n")
    return path


def build(shape: Shape, path: Path, seed: int, device: str, dtype: torch.dtype) -> PreTrainedModel:
    """The random-weight model of ``shape`` on ``device``, through the loader the testbed's processes use."""
    return load_model(write_random_dir(shape, path, seed), "target", device, dtype)


@torch.no_grad()
def final_hidden(target: PreTrainedModel, prompts: list[list[int]]) -> torch.Tensor:
    """[N, d]: the target's final (post-norm) hidden states at every prompt position."""
    x = torch.tensor(prompts, device=target.device)  # [B, S]
    return target.model(input_ids=x).last_hidden_state.flatten(0, 1)  # [B * S, d]


@torch.no_grad()
def head_agreement(hidden: torch.Tensor, weight: torch.Tensor, noise: torch.Tensor,
                   sigmas: tuple[float, ...]) -> list[float]:
    """Per sigma: the fraction of positions whose top-1 under ``weight + sigma * std(weight) * noise`` is the one
    under ``weight`` (hidden [N, d], weight and noise [V, d])."""
    ref = (hidden @ weight.T).argmax(-1)  # [N]
    std = weight.float().std()
    return [float(((hidden @ (weight + (s * std * noise).to(weight.dtype)).T).argmax(-1) == ref).float().mean())
            for s in sigmas]


def pick_sigma(sigmas: tuple[float, ...], agreements: list[float], want: float) -> float:
    """The largest noise whose agreement is still >= ``want`` (the smallest noise when none is)."""
    ok = [s for s, a in zip(sigmas, agreements) if a >= want]
    return max(ok) if ok else min(sigmas)


def noisy_head_drafter(target: PreTrainedModel, sigma: float, seed: int, noise: torch.Tensor | None = None,
                       sharpen: float = 1.0) -> PreTrainedModel:
    """A drafter sharing the target's decoder (no copy) with LM head ``sharpen * (W + sigma * std(W) * N)``: the
    target's weights with small noise where they decide the token, so it agrees often, not always.  ``sharpen``
    (a drafter temperature of 1 / sharpen) leaves its argmax alone; random weights give nearly flat distributions,
    over which a best-first draft tree spreads one level wide instead of following the drafter's chain."""
    w = target.lm_head.weight  # [V, d]
    if noise is None:
        noise = torch.randn(w.shape, generator=torch.Generator(w.device).manual_seed(seed), device=w.device)
    with torch.device("meta"):
        drafter = AutoModelForCausalLM.from_config(target.config)
    drafter.model = target.model
    drafter.lm_head = nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device, dtype=w.dtype)
    drafter.lm_head.weight.data = (sharpen * (w.detach().float() + sigma * w.float().std() * noise)).to(w.dtype)
    return drafter.eval()


@torch.no_grad()
def calibrated_drafter(target: PreTrainedModel, prompts: list[list[int]], sigmas: tuple[float, ...], want: float,
                       seed: int, logit_std: float = 8.0) -> tuple[PreTrainedModel, dict]:
    """The noisy-head drafter whose noise gives about ``want`` top-1 agreement on the prompts' positions, its
    logits scaled to a standard deviation of about ``logit_std`` there."""
    w = target.lm_head.weight
    noise = torch.randn(w.shape, generator=torch.Generator(w.device).manual_seed(seed), device=w.device)  # [V, d]
    hidden = final_hidden(target, prompts)  # [N, d]
    agreements = head_agreement(hidden, w, noise, sigmas)
    sigma = pick_sigma(sigmas, agreements, want)
    sharpen = logit_std / float((hidden @ w.T).float().std())
    drafter = noisy_head_drafter(target, sigma, seed, noise, sharpen)
    del noise
    return drafter, {"kind": "target decoder + noisy LM head", "sigma": sigma, "sharpen": sharpen,
                     "want_agreement": want,
                     "agreement_by_sigma": dict(zip(map(str, sigmas), agreements))}
