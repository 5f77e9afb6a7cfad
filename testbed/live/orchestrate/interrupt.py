"""SIGINT and SIGTERM for the orchestrators (testbed.run, testbed.load): unwind, stop the children, remove the
namespaces.

``guarded(prog, body)`` runs ``body`` with both signals raising ``Interrupted`` in the main thread, so that every
``finally`` on the way out runs (children stopped by PID, the link emulator stopped, namespaces deleted).  After
the first signal both are ignored, so that a second one cannot cut the cleanup short.  Whatever an interruption
caught halfway is then done again: every child still running is stopped (``procs.stop_all``) and every
namespace still there is deleted (``netns.teardown_open``).  The process exits with 128 + the signal's number
(130 for SIGINT, 143 for SIGTERM) and a message saying what it stopped.
"""
from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from channel.netns import teardown_open
from testbed.live.orchestrate.procs import stop_all

SIGNALS = (signal.SIGINT, signal.SIGTERM)
T = TypeVar("T")


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


@contextmanager
def interruptible() -> Iterator[None]:
    """Within: SIGINT and SIGTERM raise Interrupted (once; later ones are ignored); the old handlers after."""
    def handler(signum: int, _frame) -> None:
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise Interrupted(signum)

    old = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def guarded(prog: str, body: Callable[[], T]) -> T:
    """``body()``; on SIGINT or SIGTERM: clean up (module doc), say so on stderr, exit 128 + the signal."""
    try:
        with interruptible():
            return body()
    except Interrupted as e:
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)  # the cleanup below runs to its end
        pids, namespaces = stop_all(), teardown_open()
        late = f"; stopped child PIDs {pids}" if pids else ""
        late += f"; removed namespaces {namespaces}" if namespaces else ""
        print(f"{prog}: {e}: child processes stopped and namespaces removed{late}; results so far are in --out "
              "(no 'complete' marker)", file=sys.stderr, flush=True)
        sys.exit(128 + e.signum)
