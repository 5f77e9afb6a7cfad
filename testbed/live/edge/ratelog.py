"""Rate-limited warnings: a peer that fails handshakes in a loop must not fill the edge's disk with its log.

``RateLimit`` is a logging filter: each message template (the record's unformatted ``msg``) passes at most
``burst`` times per ``window_s``; the first record after a window with suppressions says how many were left out.
"""
from __future__ import annotations

import logging
import time

WINDOW_S = 10.0  # default window, s
BURST = 5  # default records of one template per window


class RateLimit(logging.Filter):
    """Let at most ``burst`` records of each template through per ``window_s``; count the rest."""

    def __init__(self, window_s: float = WINDOW_S, burst: int = BURST, clock=time.monotonic):
        super().__init__()
        self.window_s, self.burst, self.clock = window_s, burst, clock
        self.seen: dict[str, tuple[float, int, int]] = {}  # template -> (window start, passed, suppressed)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        now, key = self.clock(), str(record.msg)
        start, passed, dropped = self.seen.get(key, (now, 0, 0))
        if now - start >= self.window_s:
            if dropped:
                record.msg = f"{record.msg} ({dropped} similar message(s) suppressed in the last {self.window_s:g} s)"
            start, passed, dropped = now, 0, 0
        if passed >= self.burst:
            self.seen[key] = (start, passed, dropped + 1)
            return False
        self.seen[key] = (start, passed + 1, dropped)
        return True


def limit(*names: str, window_s: float = WINDOW_S, burst: int = BURST) -> RateLimit:
    """Attach one RateLimit to the named loggers; returns it."""
    f = RateLimit(window_s, burst)
    for name in names:
        logging.getLogger(name).addFilter(f)
    return f
