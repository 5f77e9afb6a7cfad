"""Where a result was measured: CPU model and count, platform, Python, torch and transformers versions, git commit."""
from __future__ import annotations

import contextlib
import platform
from pathlib import Path

from config.provenance import provenance


def machine_info() -> dict:
    """The machine and code a benchmark ran on, for its JSON."""
    import torch
    import transformers
    return provenance() | {"cpu_model": cpu_model(), "torch": torch.__version__,
                           "transformers": transformers.__version__}


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what platform knows of the processor."""
    with contextlib.suppress(OSError):
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                return value.strip()
    return platform.processor() or platform.machine()
