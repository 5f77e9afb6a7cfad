"""A distillation run's directory: its training state (for resuming), its milestone checkpoints (for the learning
curve) and the facts the curve needs to rebuild a drafter from them.

Layout of a run directory:

- ``state.pt``: the trained tensors (fp32), the optimizer's state, the step, the generated tokens seen, the per-epoch
  loss sums, Python's and torch's RNG states and the run's config; written atomically (a temporary file, fsync,
  ``os.replace``), so a kill leaves the previous state whole;
- ``milestones/t<tokens>-s<step>.safetensors``: the trained tensors (fp16) when the generated tokens seen pass a
  milestone, and at the end (atomically too);
- ``run.json``: the layers kept and the head's vocabulary (what scripts/train/drafter_curve.py needs)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch
from safetensors.torch import save_file

STATE_FILE = "state.pt"
RUN_FILE = "run.json"
MILESTONE_DIR = "milestones"
_MILESTONE_RE = re.compile(r"^t(\d+)-s(\d+)\.safetensors$")


def _replace_atomically(tmp: Path, path: Path) -> None:
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_state(run_dir: Path, state: dict) -> Path:
    """Write the training state atomically; returns its path."""
    path = Path(run_dir) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    _replace_atomically(tmp, path)
    return path


def load_state(run_dir: Path) -> dict | None:
    """The run's last training state, or None if it has none."""
    path = Path(run_dir) / STATE_FILE
    return torch.load(path, weights_only=True) if path.is_file() else None


def save_milestone(run_dir: Path, tensors: dict[str, torch.Tensor], tokens: int, step: int) -> Path:
    """The trained tensors in fp16 at ``tokens`` generated tokens seen (``step`` optimizer steps), atomically."""
    path = Path(run_dir) / MILESTONE_DIR / f"t{tokens:09d}-s{step:06d}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file({k: v.detach().to(torch.float16).contiguous() for k, v in tensors.items()}, str(tmp))
    _replace_atomically(tmp, path)
    return path


def milestones(run_dir: Path) -> list[tuple[int, int, Path]]:
    """(generated tokens seen, step, path) of the run's milestone checkpoints, by tokens."""
    found = []
    for p in (Path(run_dir) / MILESTONE_DIR).glob("t*-s*.safetensors"):
        m = _MILESTONE_RE.match(p.name)
        if m:
            found.append((int(m.group(1)), int(m.group(2)), p))
    return sorted(found)


def write_run(run_dir: Path, layers: list[int], head_vocab: list[int], config: dict) -> Path:
    """run.json: the drafter's layers, its head vocabulary and the run's config."""
    path = Path(run_dir) / RUN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"layers": layers, "head_vocab": head_vocab, "config": config}) + "\n")
    _replace_atomically(tmp, path)
    return path


def read_run(run_dir: Path) -> dict:
    """run.json of a run directory; a clear error if it has none."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: is {run_dir} a run of scripts/train/smollm2_drafter.py?")
    return json.loads(path.read_text())


def config_mismatch(saved: dict, now: dict) -> list[str]:
    """The run-defining settings whose values differ between a saved state's config and this run's."""
    return sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
