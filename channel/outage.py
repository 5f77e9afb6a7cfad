"""Link outages: periods when nothing passes the link, as pure functions of time on the link's clock.

An outage is a half-open span ``[start_s, end_s)`` of seconds from the link's start (the trace clock).  During
one, the emulated link neither serializes nor delivers: a chunk that would start or finish serializing in it
waits (serialization is paused for the outage's length), and one that would be delivered in it is delivered
when it ends (the relay holds the bytes, as a TCP connection over a dead radio link would resend them once the
link returns).  Spans repeat every ``period_s`` when the trace they belong to loops.  Given as text, outages are
``START_S:DURATION_S`` periods separated by commas (``"10:5,30:2.5"``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

Span = tuple[float, float]  # (start_s, end_s) of one outage on the link's clock, s


@dataclass(frozen=True)
class Outages:
    """Sorted, disjoint outage spans, optionally repeating every period_s."""

    spans: tuple[Span, ...] = ()  # (start_s, end_s), sorted and disjoint (merged by make())
    period_s: float = math.inf  # the spans repeat with this period (a looping trace); inf: once

    @classmethod
    def make(cls, spans: list[Span] | tuple[Span, ...], period_s: float = math.inf) -> Outages:
        """Validated outages: overlapping or touching spans are merged; each must be finite with start < end."""
        for a, b in spans:
            if not (math.isfinite(a) and math.isfinite(b) and 0 <= a < b):
                raise ValueError(f"an outage needs 0 <= start < end (finite, s), got ({a}, {b})")
            if b > period_s:
                raise ValueError(f"outage ({a}, {b}) runs past the trace's loop period {period_s} s")
        merged: list[Span] = []
        for a, b in sorted(spans):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        if math.isfinite(period_s) and sum(b - a for a, b in merged) >= period_s:
            raise ValueError(f"outages {merged} leave the looping link no time up in its period {period_s} s")
        return cls(tuple(merged), period_s)

    def __bool__(self) -> bool:
        return bool(self.spans)

    def _shifted(self, t0_s: float, t1_s: float) -> list[Span]:
        """Every span (repeats included) that overlaps [t0_s, t1_s], in time order."""
        if not self.spans:
            return []
        if math.isinf(self.period_s):
            return [(a, b) for a, b in self.spans if b > t0_s and a <= t1_s]
        k0 = math.floor(t0_s / self.period_s) - 1
        k1 = math.floor(t1_s / self.period_s) + 1
        out = [(a + k * self.period_s, b + k * self.period_s) for k in range(k0, k1 + 1) for a, b in self.spans]
        return [(a, b) for a, b in out if b > t0_s and a <= t1_s]

    def end_of(self, t_s: float) -> float:
        """t_s when the link is up then; else the end of the outage in force at t_s (of the next one too, if
        a repeat starts right there)."""
        while True:
            hit = next((b for a, b in self._shifted(t_s, t_s) if a <= t_s < b), None)
            if hit is None:
                return t_s
            t_s = hit

    def overlap_s(self, t0_s: float, t1_s: float) -> float:
        """Seconds of outage within [t0_s, t1_s]."""
        if t1_s <= t0_s:
            return 0.0
        return sum(min(b, t1_s) - max(a, t0_s) for a, b in self._shifted(t0_s, t1_s) if min(b, t1_s) > max(a, t0_s))

    def stretch(self, t_s: float, busy_s: float) -> float:
        """When ``busy_s`` seconds of work that needs the link, starting at t_s, end: paused during outages."""
        t = self.end_of(t_s)
        left = busy_s
        while True:
            nxt = next(((a, b) for a, b in self._shifted(t, t + left) if a > t), None)
            if nxt is None or nxt[0] >= t + left:
                return t + left
            left -= nxt[0] - t
            t = nxt[1]


def parse_outages(text: str) -> list[Span]:
    """``"10:5,30:2.5"`` -> [(10.0, 15.0), (30.0, 32.5)]; an empty text: none."""
    spans = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        start, sep, dur = part.partition(":")
        try:
            a, d = float(start), float(dur)
        except ValueError:
            raise ValueError(f"outage {part!r}: expected START_S:DURATION_S, e.g. 10:5") from None
        if not sep or not (math.isfinite(a) and a >= 0 and math.isfinite(d) and d > 0):
            raise ValueError(f"outage {part!r}: expected START_S:DURATION_S with START_S >= 0 and DURATION_S > 0")
        spans.append((a, a + d))
    return spans
