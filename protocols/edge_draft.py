"""The edge's own drafts (``--edge-draft``): the target verifies them in the pass that decodes the next token, so one
pass may commit several tokens, and the output stays the target's greedy one.  Used by server-only streams
(protocols/stream.py) and by the rounds `auto` hands to the edge (protocols/edge_run.py); the
suffix index also learns from the speculative sessions' prompts and committed outputs.

- ``ngram``: prompt lookup over the session's prompt and output so far (wisv/decoding/ngram.py, vLLM's rule).
- ``suffix``: suffix drafting (wisv/decoding/suffix.py) over one index shared by the edge's sessions: each live
  session's prompt and output so far, and the committed outputs of the sessions that ended (the oldest dropped past
  the index's bound in bytes).
- ``none``: no draft (one token per pass, as before).

A thin holder of the pure proposers: it keeps which session holds which sequence of the shared index; and the one
greedy step (verify a draft, commit its accepted prefix and the target's token after it) both users share.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from protocols.edge_draft_names import EDGE_DRAFTS
from wisv.decoding.acceptance import Verdict, greedy_accept_ids
from wisv.decoding.ngram import NgramConfig
from wisv.decoding.ngram import propose as ngram_propose
from wisv.decoding.sessions import Block, VerifySession
from wisv.decoding.speculative import truncate_output
from wisv.decoding.suffix import SuffixCache, SuffixConfig


@dataclass(frozen=True)
class EdgeDraftConfig:
    """What the edge drafts for its server-only streams."""

    method: str = "none"  # none | ngram | suffix (module doc)
    max_tokens: int = 8  # most tokens one proposal carries, tokens
    cache_mb: float = 64.0  # suffix: bound of the shared index over all sessions (and of one session's), MB

    def __post_init__(self) -> None:
        if self.method not in EDGE_DRAFTS:
            raise ValueError(f"edge draft method must be one of {', '.join(EDGE_DRAFTS)}, got {self.method!r}")
        if self.max_tokens < 1 or not self.cache_mb > 0:
            raise ValueError(f"edge drafts need max_tokens >= 1 and cache_mb > 0, got {self.max_tokens}, "
                             f"{self.cache_mb}")


class EdgeDrafter:
    """Proposals for the edge's streams, by session key; one per edge (the suffix index is shared)."""

    def __init__(self, cfg: EdgeDraftConfig | None = None):
        self.cfg = cfg or EdgeDraftConfig()
        self.cache: SuffixCache | None = None
        if self.cfg.method == "suffix":
            total = int(self.cfg.cache_mb * 2**20)
            base = SuffixConfig()
            self.cache = SuffixCache(SuffixConfig(num_speculative_tokens=self.cfg.max_tokens, max_total_bytes=total,
                                                  max_seq_bytes=max(min(base.max_seq_bytes, total), base.token_cost)))
        self.ngram = NgramConfig(num_speculative_tokens=self.cfg.max_tokens)
        self.prompt_len: dict[str, int] = {}  # live session key -> its prompt's length (the output follows)

    @property
    def drafts(self) -> bool:
        return self.cfg.method != "none"

    def open(self, key: str, prompt: Sequence[int]) -> None:
        """A stream starts: its prompt joins the index."""
        self.prompt_len[key] = len(prompt)
        if self.cache is not None:
            self.cache.add(("live", key), prompt)

    def propose(self, key: str, context: Sequence[int], k: int) -> list[int]:
        """Up to ``k`` tokens after ``context`` (the session's prompt and output so far); [] for none."""
        if k <= 0 or self.cfg.method == "none":
            return []
        if self.cache is not None:
            return self.cache.propose(context, k)
        return ngram_propose(context, self.ngram, k)

    def commit(self, key: str, tokens: Sequence[int]) -> None:
        """The session committed ``tokens``: its sequence in the index grows."""
        if self.cache is not None:
            self.cache.extend(("live", key), tokens)

    def close(self, key: str, ended: bool) -> None:
        """The session is gone: its prompt leaves the index; when its stream ``ended`` (budget or EOS) its committed
        output stays, as a past session's; a dropped one leaves nothing."""
        n = self.prompt_len.pop(key, None)
        if self.cache is None or n is None:
            return
        output = self.cache.tokens(("live", key))[n:]
        self.cache.drop(("live", key))
        if ended and output:
            self.cache.add(("done", key), output)


def greedy_step(verify: VerifySession, draft: list[int], block: Block, room: int,
                eos_token_id: int | None) -> tuple[list[int], int]:
    """Commit a verified ``draft``'s accepted prefix and the target's argmax after it (the greedy rule) on ``verify``;
    (the committed tokens, at most ``room`` and cut after EOS; how many of them were draft tokens)."""
    v = greedy_accept_ids(torch.as_tensor(draft, dtype=torch.long), block.argmax.cpu())
    committed = truncate_output(verify.commit(draft, v.n_accepted, v.next_token), room, eos_token_id)
    return committed, min(v.n_accepted, len(committed))


def extend_verdict(draft: Sequence[int], extension: Sequence[int], argmax: torch.Tensor,
                   v: Verdict) -> tuple[int, Verdict]:
    """The greedy verdict over the UE's ``draft`` extended by the edge's ``extension`` (verified in the same pass,
    ``argmax``: [K + E + 1] the target's tokens): past a wholly accepted draft the extension's agreeing prefix is
    accepted too, and the target's token after it is the next token.  (extension tokens accepted, the verdict over
    draft + extension)."""
    if not extension or v.n_accepted < len(draft):
        return 0, v
    e = greedy_accept_ids(torch.as_tensor(list(extension), dtype=torch.long), argmax[len(draft):])
    return e.n_accepted, dataclasses.replace(v, n_accepted=v.n_accepted + e.n_accepted, next_token=e.next_token)
