"""The edge's commit journal (``testbed.serve --journal FILE``): one JSON line per event, appended and flushed as it
happens, so that a killed edge keeps every line it wrote.  Events: ``open`` (a session, fresh or resumed, with its
first round), ``commit`` (the tokens one round committed, once per round verified: a retransmission answered from
the cache is not a commit) and ``drop`` (a session freed: closed, resumed over, swept, its peer gone or silent).
The chaos harness (testbed/chaos) checks its invariants on these lines and the UEs' per-round records."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path


class Journal:
    """Appends the edge's events to one JSONL file (``pid`` tells the edge processes of a restarted edge apart)."""

    def __init__(self, path: str | Path):
        self._file = Path(path).open("a")
        self.pid = os.getpid()
        self.seen: dict[str, int] = {}  # session token -> its rounds already journaled

    def _line(self, ev: str, **fields) -> None:
        self._file.write(json.dumps({"ev": ev, "t": time.time(), "pid": self.pid, **fields}) + "\n")
        self._file.flush()

    def opened(self, sess) -> None:
        self.seen[sess.token] = sess.rounds
        self._line("open", sid=sess.sid, token=sess.token, round=sess.next_round)

    def verdict(self, sess, round_: int) -> None:
        """A VERDICT of ``sess`` for ``round_``: a commit when the session verified a round since the last one."""
        if sess is None or self.seen.get(sess.token) == sess.rounds:
            return
        self.seen[sess.token] = sess.rounds
        self._line("commit", sid=sess.sid, token=sess.token, round=round_, tokens=list(sess.last_committed),
                   done=bool(sess.done))

    def dropped(self, sid: str, token: str) -> None:
        self.seen.pop(token, None)
        self._line("drop", sid=sid, token=token)

    def close(self) -> None:
        self._file.close()
