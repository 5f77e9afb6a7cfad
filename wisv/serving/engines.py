"""The edge's engines by ``--engine`` name: each builder imports its engine's module on use, so an edge that serves
one engine never loads the other (e.g. vLLM), and the interface (wisv/serving/engine.py) imports none.

- ``transformers``: wisv/serving/batchverify.py ``BatchVerifier`` (a KV cache per session, our batched pass; trees too);
- ``vllm``: wisv/serving/vllm_engine.py ``VllmVerifier`` (prefix caching; chains only).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wisv.serving.engine import EngineOptions, VerifyEngine


def _transformers(target: Any, opts: EngineOptions) -> VerifyEngine:
    from wisv.serving.batchverify import from_options  # on use: the edge that serves vLLM never loads it
    return from_options(target, opts)


def _vllm(target: Any, opts: EngineOptions) -> VerifyEngine:
    from wisv.serving.vllm_engine import from_options  # on use: vLLM is an optional dependency
    return from_options(target, opts)


ENGINES: dict[str, Callable[[Any, EngineOptions], VerifyEngine]] = {
    "transformers": _transformers,  # --engine name -> builder: (target, EngineOptions) -> VerifyEngine
    "vllm": _vllm}
ENGINE_CHOICES = tuple(ENGINES)  # --engine


def check_engine(name: str) -> str:
    """The engine name, or ValueError naming the choices."""
    if name not in ENGINE_CHOICES:
        raise ValueError(f"unknown engine {name!r}; choose one of {ENGINE_CHOICES}")
    return name


def build_engine(name: str, target: Any, opts: EngineOptions) -> VerifyEngine:
    """The engine ``name`` over a loaded target (or, for vllm, the target's facts: TargetFacts)."""
    return ENGINES[check_engine(name)](target, opts)
