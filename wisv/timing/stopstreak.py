"""The streak a lookup stop waits for, priced by what the lookup would have drafted after each streak (pure).

The edge ends a run it generates for a UE that drafts by prompt lookup after the lookup named ``s`` tokens in a row
(protocols/edge_run.py); the UE then speculates.  Which ``s`` pays depends on the link: a short streak stops more
often on weaker spans, and each stop pays a speculative round's round trip and, where the lookup then fails, a
GENERATE's to hand the rest back.  Round 24 chose one streak on the dev slice (3): streak 1 ran faster at 20 ms and
slower at 100 ms.

Every committed token teaches what a stop after each streak would have bought, at no cost: the UE holds the output,
so at each position it can say how many tokens in a row the lookup had named before it (capped at the longest streak
asked for) and how many of the lookup's proposal there the target's tokens then matched (``ngram.streak_yields``).
``StreakYield`` keeps those, decayed per prompt; ``stop_streak`` asks for the shortest streak whose predicted round
after the stop, measured seconds (``StopGain``) plus the hand-back, costs less than the edge takes for the tokens it
would commit; none: no stop, tried again at the longest streak after ``STOP_REPROBE_TOKENS`` as before.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

YIELD_DECAY = 0.8  # weight of the earlier prompts' counts against a new prompt's (per prompt)
MIN_YIELD_COUNT = 3.0  # decayed positions a streak needs before its yield is trusted


@dataclass(frozen=True)
class StreakYield:
    """Decayed counts, by the streak before a position (0 to the cap, the last bucket the cap and more), of the
    positions where prompt lookup proposed, and the tokens of those proposals the target's output matched."""

    positions: tuple[float, ...] = ()  # decayed positions with a proposal, by streak
    matched: tuple[float, ...] = ()  # decayed proposal tokens the output matched there, by streak

    def mean(self, streak: int, min_count: float = MIN_YIELD_COUNT) -> float | None:
        """Tokens a proposal after ``streak`` matched, decayed mean; None with fewer than ``min_count`` positions."""
        if streak >= len(self.positions) or self.positions[streak] < min_count:
            return None
        return self.matched[streak] / self.positions[streak]


def learn_streak_yield(y: StreakYield, pairs: Sequence[tuple[int, int]], cap: int,
                       decay: float = YIELD_DECAY) -> StreakYield:
    """The yield after one more prompt's (streak, matched) ``pairs`` (``ngram.streak_yields``), streaks capped at
    ``cap``; the earlier counts decay once."""
    if cap < 1 or not 0 <= decay < 1:
        raise ValueError(f"need cap >= 1 and decay in [0, 1), got {cap}, {decay}")
    pos = [decay * c for c in y.positions[:cap + 1]] + [0.0] * (cap + 1 - len(y.positions[:cap + 1]))
    got = [decay * c for c in y.matched[:cap + 1]] + [0.0] * (cap + 1 - len(y.matched[:cap + 1]))
    for streak, matched in pairs:
        s = min(max(0, streak), cap)
        pos[s] += 1.0
        got[s] += matched
    return StreakYield(tuple(pos), tuple(got))


def yield_pays(y: StreakYield, streak: int, round_s: float | None, handback_s: float,
               edge_s_per_token: float) -> bool | None:
    """Whether a speculative round after ``streak`` named tokens pays: its measured seconds (``round_s``) and the
    hand-back cost less than the edge takes for the tokens it commits (the proposal's expected match, plus the
    verdict's own token); None while either is unmeasured."""
    mean = y.mean(streak)
    if mean is None or round_s is None:
        return None
    return round_s + handback_s < (1.0 + mean) * edge_s_per_token


def stop_streak(y: StreakYield, round_s: float | None, handback_s: float, edge_s_per_token: float, cap: int,
                reprobe: bool = False) -> int:
    """The streak the next run's stop waits for: the shortest in 1..``cap`` whose round pays (``yield_pays``); 0
    where none does and each was measured; ``cap`` before a stop's round was measured, where none measured pays and
    some streak is unmeasured, or when ``reprobe`` (the edge generated enough alone
    since a stop was last asked for: a streak that did not pay once must not stay off for good)."""
    if cap < 1:
        raise ValueError(f"need cap >= 1, got {cap}")
    if reprobe or round_s is None:
        return cap
    verdicts = [yield_pays(y, s, round_s, handback_s, edge_s_per_token) for s in range(1, cap + 1)]
    paying = [s for s, pays in enumerate(verdicts, start=1) if pays]
    return paying[0] if paying else (cap if None in verdicts else 0)
