"""WISV core: tasks, models, the time model, the decision head, the SD core and the edge's serving pieces; no sockets.

One subpackage per job, lowest first (docs/architecture.md; ``scripts/house/import_graph.py`` checks the order):
``tasks`` and ``records`` and ``models`` -> ``timing`` -> ``head`` -> ``decoding`` -> ``serving`` and ``pairs``.
The names below load lazily (PEP 562), so the pure modules (wisv.timing.latency, wisv.serving.scheduler,
wisv.timing.roundtime, ...) import without torch or transformers.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wisv.decoding.speculative import AcceptAll, RejectAll, RoundRecord, SpecOutput, speculative_generate
    from wisv.models.loader import ModelPair, PairError, load_pair

_LOOP = "wisv.decoding.speculative"
_HOME = {"ModelPair": "wisv.models.loader", "PairError": "wisv.models.loader", "load_pair": "wisv.models.loader",
         "AcceptAll": _LOOP, "RejectAll": _LOOP, "RoundRecord": _LOOP, "SpecOutput": _LOOP,
         "speculative_generate": _LOOP}

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
