"""Where a result was measured: CPU count, platform, Python, torch and transformers versions, git commit."""
from __future__ import annotations

from channel.config import provenance


def machine_info() -> dict:
    """The machine and code a benchmark ran on, for its JSON."""
    import torch
    import transformers
    return provenance() | {"torch": torch.__version__, "transformers": transformers.__version__}
