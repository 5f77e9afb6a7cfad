"""The verification engines' shared session bookkeeping: open, close, look up, sweep idle sessions, take a commit."""
from __future__ import annotations

import time
from typing import Any


class SessionTable:
    """Sessions by id; an engine subclasses it, makes its own state (``_new_session``) and says its idle timeout."""

    sessions: dict[str, Any]  # open sessions by id; each state has seq, drafted and last_active

    def _new_session(self, prompt_ids: list[int]) -> Any:
        raise NotImplementedError

    @property
    def idle_timeout_s(self) -> float:
        raise NotImplementedError

    def open(self, sid: str, prompt_ids: list[int]) -> None:
        """Start (or restart) a session; its prompt is forwarded with its first verification."""
        if not prompt_ids:
            raise ValueError("prompt_ids is empty")
        self.sessions[sid] = self._new_session([int(t) for t in prompt_ids])

    def close(self, sid: str) -> None:
        self.sessions.pop(sid, None)

    def sweep(self, now: float | None = None) -> list[str]:
        """Free sessions idle longer than the timeout; returns their ids."""
        now = time.monotonic() if now is None else now
        stale = [sid for sid, st in self.sessions.items() if now - st.last_active > self.idle_timeout_s]
        for sid in stale:
            self.close(sid)
        return stale

    def _state(self, sid: str) -> Any:
        try:
            return self.sessions[sid]
        except KeyError:
            raise KeyError(f"no open session {sid!r}") from None

    def _take_drafts(self, requests: list) -> list[Any]:
        """Each request's session state with its draft taken (``drafted``, ``last_active`` now), after the checks every
        engine makes: one request per session, each session open, no empty draft tree.  An empty chain is a decode
        step: the one position after the committed sequence is scored (server-only's stream, protocols/stream.py)."""
        if len({r.sid for r in requests}) != len(requests):
            raise ValueError("a batch holds at most one request per session")
        states = [self._state(r.sid) for r in requests]
        if empty := [r.sid for r in requests if not r.draft and r.parents is not None]:
            raise ValueError(f"session {empty[0]}: empty draft tree")
        for st, r in zip(states, requests):
            st.drafted, st.last_active = [int(t) for t in r.draft], time.monotonic()
        return states

    def _committed(self, sid: str, n_accepted: int, next_token: int) -> tuple[Any, list[int]]:
        """The session and the tokens a commit appends, ``drafted[:n_accepted] + [next_token]`` (checked)."""
        st = self._state(sid)
        if not 0 <= n_accepted <= len(st.drafted):
            raise ValueError(f"session {sid}: n_accepted {n_accepted} outside [0, {len(st.drafted)}]")
        return st, st.drafted[:n_accepted] + [int(next_token)]
