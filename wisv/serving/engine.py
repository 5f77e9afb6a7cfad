"""The edge's verification interface: the engine protocol, its request, a one-session view, the engines by name.

A session is opened with its prompt (``open``); ``verify`` takes one block per session, any number of sessions at
once (a batch), and returns each session's ``Block``: the target's logits, argmax and final hidden states at the
K + 1 positions ``[seq[-1]] + draft``; ``commit`` appends ``draft[:n_accepted] + [next_token]`` to the committed
sequence; ``close`` frees the session.  The edge's batcher (testbed/live/edge/edgebatch.py) and scheduler
(wisv/serving/scheduler.py) choose which requests form a ``verify`` call; the engine runs it.

This module imports no engine: the engines by name and their builders are in wisv/serving/engines.py, which imports
each one when asked (so the edge that serves one engine never loads the other, e.g. vLLM).

Engines, by ``--engine`` name:
- ``transformers``: the target as a transformers model, a KV cache per session, our batched pass
  (wisv/serving/batchverify.py ``BatchVerifier``).  Verifies draft trees too, each in a pass of its own.
- ``vllm``: the target served by vLLM, prefix caching in place of the per-session caches
  (wisv/serving/vllm_engine.py ``VllmVerifier``).  Chains only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # for hints only: the interface imports without torch (the edge's config reads engines.py)
    from wisv.decoding.sessions import Block
    from wisv.head.features import SiblingRows


@dataclass(frozen=True)
class VerifyRequest:
    """Verify ``draft`` for session ``sid`` (K tokens; the target scores K + 1 positions; K = 0: a decode step)."""

    sid: str
    draft: list[int]
    parents: list[int] | None = None  # a draft tree's parent indices (wisv.decoding.tree; -1: the root); None: a chain


@dataclass(frozen=True, kw_only=True)
class EngineOptions:
    """What the edge asks of the engine it builds (from its ServeConfig)."""

    kv_reuse: bool = True  # False: recompute each prefix every round (transformers; vllm: no prefix caching)
    session_timeout_s: float = 120.0  # idle sessions are freed after this long, s
    memory_budget_mb: float = 2048.0  # cap on all sessions' KV caches together, MB
    hidden_layer: int = -1  # the target layer whose hidden states each block carries (the decision head's input)
    dtype: str = "float32"  # the target's weights, a torch dtype name without "torch." (vllm loads the target itself)
    extra: Any = None  # the engine's own options (vllm: its VllmConfig); None: its defaults


class SessionLike(Protocol):
    """What the edge reads of an engine's session (the scheduler's request shape,
    wisv.serving.batchverify.request_shape)."""

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



class EngineView:
    """One engine session behind VerifySession's interface (verify alone, commit, free) for the edge's sessions; any
    engine of wisv/serving/engines.py."""

    def __init__(self, engine: VerifyEngine, sid: str, prompt_ids: list[int]):
        self.engine, self.sid = engine, sid
        engine.open(sid, prompt_ids)

    @property
    def seq(self) -> list[int]:
        return self.engine.sessions[self.sid].seq

    @property
    def cached_len(self) -> int:
        st = self.engine.sessions.get(self.sid)
        return st.cached_len if st else 0

    @property
    def hidden_layer(self) -> int:
        return self.engine.hidden_layer

    @property
    def tree_refusal(self) -> str:
        """Why a tree session is refused on this engine (it names the engine)."""
        return self.engine.tree_refusal

    @property
    def takes_trees(self) -> bool:
        """Whether the engine verifies draft trees (one session per pass; chains batch)."""
        return hasattr(self.engine, "commit_path")

    def verify(self, draft: list[int]) -> Block:
        return self.engine.verify([VerifyRequest(self.sid, list(draft))])[self.sid]

    def verify_tree(self, tokens: list[int], parents: list[int]) -> Block:
        return self.engine.verify([VerifyRequest(self.sid, list(tokens), list(parents))])[self.sid]

    def verify_siblings(self, draft: list[int], positions: list[int], tokens: list[int]) -> SiblingRows:
        """The sibling branch after the chain's pass (the transformers engine's BatchVerifier.verify_siblings)."""
        return self.engine.verify_siblings(self.sid, list(positions), list(tokens))

    def commit(self, draft: list[int], n_accepted: int, next_token: int) -> list[int]:
        return self.engine.commit(self.sid, n_accepted, next_token)

    def commit_path(self, tokens: list[int], path: list[int], next_token: int) -> list[int]:
        return self.engine.commit_path(self.sid, path, next_token)

    def free(self) -> None:
        self.engine.close(self.sid)
