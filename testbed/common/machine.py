"""Where a result was measured: CPU model and count, platform, Python, torch and transformers versions, git commit."""
from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def machine_info() -> dict:
    """The machine and code a benchmark ran on, for its JSON."""
    import torch
    import transformers
    return {"cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain"))}


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what platform knows of the processor."""
    with contextlib.suppress(OSError):
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                return value.strip()
    return platform.processor() or platform.machine()


def _git(*args: str) -> str | None:
    """git's stdout in the repository, or None when git is missing or fails."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        p = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=10)
        return p.stdout.strip() if p.returncode == 0 else None
    return None
