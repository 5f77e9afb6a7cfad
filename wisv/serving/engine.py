"""The edge's verification interface: an engine holds the target and the sessions on it, and verifies their blocks.

A session is opened with its prompt (``open``); ``verify`` takes one block per session, any number of sessions at
once (a batch), and returns each session's ``Block``: the target's logits, argmax and final hidden states at the
K + 1 positions ``[seq[-1]] + draft``; ``commit`` appends ``draft[:n_accepted] + [next_token]`` to the committed
sequence; ``close`` frees the session.  The edge's batcher (testbed/live/edgebatch.py) and scheduler
(wisv/scheduler.py) choose which requests form a ``verify`` call; the engine runs it.

Engines, by ``--engine`` name:
- ``transformers``: the target as a transformers model, a KV cache per session, our batched pass
  (wisv/serving/batchverify.py ``BatchVerifier``).  Verifies draft trees too (without batching: wisv/decoding/sessions.py).
- ``vllm``: the target served by vLLM, prefix caching in place of the per-session caches
  (wisv/serving/vllm_engine.py ``VllmVerifier``).  Chains only.
"""
from __future__ import annotations

from typing import Protocol

from wisv.decoding.sessions import Block
from wisv.serving.batchverify import VerifyRequest

ENGINE_CHOICES = ("transformers", "vllm")  # --engine


class SessionLike(Protocol):
    """What the edge reads of an engine's session (the scheduler's request shape, wisv.serving.batchverify.request_shape)."""

    seq: list[int]  # committed tokens (prompt + output)
    cached_len: int  # positions of seq the engine expects to hold in its cache (an estimate for vLLM)


class VerifyEngine(Protocol):
    """One verification engine on the edge."""

    name: str  # its --engine name
    tree_refusal: str  # why a tree session is refused at OPEN (names the engine)
    hidden_layer: int  # the target layer whose hidden states each block carries (the decision head's input)
    sessions: dict[str, SessionLike]  # open sessions by id

    def open(self, sid: str, prompt_ids: list[int]) -> None:
        """Start (or restart) session ``sid`` on its prompt."""

    def verify(self, requests: list[VerifyRequest]) -> dict[str, Block]:
        """One block per request (one request per session), verified together; each session's Block."""

    def commit(self, sid: str, n_accepted: int, next_token: int) -> list[int]:
        """Commit the verified draft's first ``n_accepted`` tokens and ``next_token``; the committed tokens."""

    def close(self, sid: str) -> None:
        """Free a session (no error when it is not open)."""

    def sweep(self, now: float | None = None) -> list[str]:
        """Free sessions idle past the engine's timeout; their ids."""

    def memory_bytes(self) -> int:
        """KV-cache bytes this process holds for the sessions (0 where the engine owns its cache)."""


def check_engine(name: str) -> str:
    """The engine name, or ValueError naming the choices."""
    if name not in ENGINE_CHOICES:
        raise ValueError(f"unknown engine {name!r}; choose one of {ENGINE_CHOICES}")
    return name
