"""The next block's K as one pure function of what the UE knows: the four rules that set it, in order.

1. the cap: at most ``k_max`` (``--draft-len``, or ``--draft-len-max`` under ``--draft-len auto``), and one token of
   the generation budget left for the edge's correction or bonus token; at least 1;
2. the edge's stop depth (``--follow-stop-depth``): at most the depth its last VERDICT suggested;
3. the auto window (``--draft-len auto``): the K that minimises the predicted time per committed token, at most the
   K so far (wisv/timing/window.py; the caller passes it as ``window``, the tracker's choice);
4. SpecEdge's pipeline depth (``--pipeline-depth``): K with ``K tau_d + RTT`` closest to the edge's last verify time,
   at most the K so far.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def pipeline_depth(t_verify_s: float, rtt_s: float, tau_d_s: float, k_min: int = 1, k_max: int = 64) -> int:
    """K with K * tau_d + RTT closest to T_verify, clamped to [k_min, k_max]."""
    if tau_d_s <= 0 or k_min < 1 or k_max < k_min:
        raise ValueError(f"need tau_d_s > 0 and 1 <= k_min <= k_max; got {tau_d_s}, {k_min}, {k_max}")
    k = round((t_verify_s - rtt_s) / tau_d_s)
    return int(min(max(k, k_min), k_max))


@dataclass(frozen=True, kw_only=True)
class KFacts:
    """What the UE knows when it sets the next block's K."""

    budget_tokens: int  # generation budget left, tokens
    k_max: int  # the largest block: --draft-len (or --draft-len-max under auto), tokens
    stop_depth: int | None = None  # rule 2: the edge's suggested depth to follow (None or 0: the rule is off)
    verify_s: float | None = None  # rule 4: the edge's last verify time, s (None: the rule is off or nothing known)
    tau_d_s: float = 0.0  # rule 4: the last block's drafting time per token, s
    rtt_s: float = 0.0  # rule 4: the RTT estimate, s


def block_k(f: KFacts, window: Callable[[int], int] | None = None) -> int:
    """K for the next block by the four rules in order; ``window(k)`` is rule 3's choice at most k (None: off)."""
    k = max(1, min(f.k_max, f.budget_tokens - 1))
    if f.stop_depth:
        k = max(1, min(k, f.stop_depth))
    if window is not None:
        k = window(k)
    if f.verify_s is not None:
        k = pipeline_depth(f.verify_s, f.rtt_s, f.tau_d_s, 1, k)
    return k
