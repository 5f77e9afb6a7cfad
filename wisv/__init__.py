"""WISV core: model pairs, acceptance rules and the in-process speculative loop (no sockets, no processes).

The names below load lazily (PEP 562), so the pure modules (wisv.latency, wisv.scheduler, wisv.roundtime, ...)
import without torch or transformers.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wisv.models import ModelPair, PairError, load_pair
    from wisv.speculative import AcceptAll, RejectAll, RoundRecord, SpecOutput, speculative_generate

_HOME = {"ModelPair": "wisv.models", "PairError": "wisv.models", "load_pair": "wisv.models",
         "AcceptAll": "wisv.speculative", "RejectAll": "wisv.speculative", "RoundRecord": "wisv.speculative",
         "SpecOutput": "wisv.speculative", "speculative_generate": "wisv.speculative"}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """Import the module that defines `name` on first use, then cache the name here."""
    if name not in _HOME:
        raise AttributeError(f"module 'wisv' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])
