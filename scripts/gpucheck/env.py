"""The environment the check ran in: device, memory, library versions."""
from __future__ import annotations

import platform
import sys

import torch
import transformers


def environment(device: str) -> dict:
    """Device name and memory, torch / CUDA / transformers / Python versions."""
    env = {"device": device, "python": sys.version.split()[0], "torch": torch.__version__,
           "cuda": torch.version.cuda, "transformers": transformers.__version__, "platform": platform.platform()}
    if str(device).startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        env |= {"device_name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                "capability": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
                "bf16": torch.cuda.is_bf16_supported()}
    else:
        env |= {"device_name": platform.processor() or "cpu", "threads": torch.get_num_threads()}
    return env


def profile_name(device_name: str) -> str:
    """Registry name of this device's measured profile: ``h100-measured``, ``h200-measured``, ... (``cpu-measured``)."""
    low = device_name.lower()
    for gpu in ("h200", "h100", "a100", "a40", "l40s", "l4"):
        if gpu in low:
            return f"{gpu}-measured"
    return "cpu-measured" if "nvidia" not in low else "gpu-measured"
