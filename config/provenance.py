"""Provenance of a result: what a saved config ran on (git commit, platform), and saving a config beside results."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from config.toml import to_toml

ROOT = Path(__file__).resolve().parents[1]  # the repository (for its git commit)


def provenance() -> dict:
    """What a saved config ran on, without torch: CPU count, platform, Python, git commit (testbed adds versions)."""
    return {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain"))}


def _git(*args: str) -> str | None:
    """git's stdout in the repository, or None when git is missing or fails."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        p = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=10)
        return p.stdout.strip() if p.returncode == 0 else None
    return None


def write_config(out: str | Path, cfg: Any, header: Mapping[str, Any] | None = None,
                 fresh: Sequence[str] = ()) -> Path:
    """Save cfg as ``out/config.toml`` (``--config`` reads it back), header (e.g. git commit) as comments.
    ``fresh``: top-level fields saved at their defaults, their values in this run only in the header (e.g. ``out``:
    the saved file reruns into a new directory instead of being refused by the finished one)."""
    path = Path(out) / "config.toml"
    defaults = type(cfg)()
    kept = {name: getattr(cfg, name) for name in fresh if getattr(cfg, name) != getattr(defaults, name)}
    cfg = dataclasses.replace(cfg, **{name: getattr(defaults, name) for name in kept})
    path.write_text(to_toml(cfg, {**(header or {}), **{f"{k} (this run)": v for k, v in kept.items()}}))
    return path


def write_config_beside(result: str | Path, cfg: Any, header: Mapping[str, Any] | None = None) -> Path:
    """Save cfg beside one result file as ``<its stem>_config.toml`` (bench.json -> bench_config.toml)."""
    path = Path(result).with_name(Path(result).stem + "_config.toml")
    path.write_text(to_toml(cfg, header))
    return path

