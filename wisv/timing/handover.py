"""Speculate, or hand the round to the edge: the choice `auto` makes before each round, as pure functions.

A speculative round's predicted time per committed token is the auto window's (wisv/timing/window.py: the best K's
``T(K) / E[C(K)]``, from the measured drafting, link, edge and overhead times).  The edge generating a chunk of n
tokens alone costs ``n t_dec + T_link(n) + overhead`` for n tokens: ``t_dec`` the edge's measured decode time per
token (a CHUNK reports its passes' time; before any chunk, the edge's measured time for a one-position pass), the
link one GENERATE up and one CHUNK of n tokens down.  The cheaper per token wins; a margin keeps the choice from
flapping on noise.

While the edge generates, no verdict says how often the drafter agrees.  The UE learns it anyway: the chunk's tokens
are the target's greedy output, and the drafter's own greedy choice at each of them (its pass over the chunk, which
it needs to continue) says where it would have been accepted (``agreement_history``).  So a drafter that agrees
again brings speculation back, as a better link does.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wisv.timing.window import AcceptanceHistory

HANDOVER_TOKENS = 16  # tokens the edge generates in a handed-over round, unless the budget is smaller
HANDOVER_MARGIN = 0.05  # the edge must be this much cheaper per token (a fraction) to take the round


@dataclass(frozen=True)
class HandOver:
    """What ``choose_round`` decided and the two costs it compared."""

    edge_alone: bool  # True: the edge generates the round's tokens alone (no draft)
    tokens: int  # the chunk's size when handed over, tokens
    spec_s_per_token: float  # predicted seconds per committed token of the best speculative round
    edge_s_per_token: float  # predicted seconds per token of the edge generating ``tokens`` alone


def edge_alone_s_per_token(decode_s_per_token: float, tokens: int, link_s: float, overhead_s: float = 0.0) -> float:
    """Seconds per token of a chunk of ``tokens`` the edge generates alone: its decode time per token plus the
    chunk's link time and fixed overhead spread over the tokens."""
    if tokens < 1 or decode_s_per_token < 0 or link_s < 0 or overhead_s < 0:
        raise ValueError(f"need tokens >= 1 and non-negative times, got {tokens}, {decode_s_per_token}, {link_s}, "
                         f"{overhead_s}")
    return decode_s_per_token + (link_s + overhead_s) / tokens


def choose_round(spec_s_per_token: float, decode_s_per_token: float, chunk_link_s: Callable[[int], float],
                 budget_tokens: int, chunk_tokens: int = HANDOVER_TOKENS, overhead_s: float = 0.0,
                 margin: float = HANDOVER_MARGIN) -> HandOver:
    """Speculate or hand over: the edge takes the round when a chunk of ``min(chunk_tokens, budget_tokens)`` tokens
    costs less per token than ``spec_s_per_token`` by more than ``margin``."""
    if not 0 <= margin < 1 or spec_s_per_token <= 0:
        raise ValueError(f"need margin in [0, 1) and spec_s_per_token > 0, got {margin}, {spec_s_per_token}")
    n = max(1, min(chunk_tokens, budget_tokens))
    edge = edge_alone_s_per_token(decode_s_per_token, n, chunk_link_s(n), overhead_s)
    return HandOver(edge < (1 - margin) * spec_s_per_token, n, spec_s_per_token, edge)


def agreement_history(h: AcceptanceHistory, agree: Sequence[bool]) -> AcceptanceHistory:
    """The acceptance history after a chunk the edge generated: at each of its tokens, whether the drafter's greedy
    choice was that token.  Greedy verification would have accepted every agreeing token and stopped at each
    disagreement, so an agreement counts as an accepted token and a disagreement as a rejection; the counts before
    decay once, as after a verdict."""
    n_agree = sum(bool(a) for a in agree)
    return AcceptanceHistory(h.decay * h.accepted + n_agree, h.decay * h.rejected + len(agree) - n_agree,
                             h.bin_accepted, h.bin_decided, h.prior_alpha, h.prior_tokens, h.decay)
