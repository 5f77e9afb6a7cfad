"""The UE's retries within a window: after a receive timeout (or a busy edge) wait with exponential backoff,
reconnect and send again; when the window is spent, fail with a message naming the edge and the window."""
from __future__ import annotations

import time

RETRYABLE = ("busy",)  # ERROR codes that ask the UE to send the same message again
FIRST_BACKOFF_S = 0.25  # wait before the first resend, s (doubled for each further one)
MAX_BACKOFF_S = 4.0  # longest wait between two attempts, s
NOTE_EVERY_S = 10.0  # while retrying, say so on stderr at the first resend and then this often, s


class RetryExhausted(RuntimeError):
    """No answer from the edge within the retry window: the UE run fails."""


def backoff_s(attempt: int, first_s: float = FIRST_BACKOFF_S, cap_s: float = MAX_BACKOFF_S) -> float:
    """Wait before resend number ``attempt`` (0: the first resend): first_s * 2**attempt, at most cap_s."""
    return min(cap_s, first_s * 2.0 ** attempt)


class Window:
    """One retry window: resends (with backoff) are allowed until ``window_s`` has passed since it opened."""

    def __init__(self, window_s: float, what: str, clock=time.monotonic, sleep=time.sleep):
        self.window_s, self.what, self.clock, self.sleep = window_s, what, clock, sleep
        self.t0 = clock()
        self.resends = 0  # resends so far
        self.noted_s: float | None = None  # when the last "waiting" note was due (None: none yet)

    def next_attempt(self, why: str) -> None:
        """Wait before the next attempt, or raise RetryExhausted if that wait would end past the window."""
        wait = backoff_s(self.resends)
        spent = self.clock() - self.t0
        if spent + wait > self.window_s:
            raise RetryExhausted(f"{self.what}: {why}; gave up after {self.resends + 1} attempts in {spent:.1f} s "
                                 f"(retry window {self.window_s:g} s, --retry-s)")
        self.sleep(wait)
        self.resends += 1

    def note_due(self) -> bool:
        """True at the first resend and then every NOTE_EVERY_S: time to tell the user the edge is silent."""
        now = self.clock()
        if self.noted_s is not None and now - self.noted_s < NOTE_EVERY_S:
            return False
        self.noted_s = now
        return True
