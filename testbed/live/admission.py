"""Fair admission of sessions on a shared edge: who holds a seat, and whether one more OPEN may have one.

A seat is a session's admission facts: its token (what its messages carry), the ROUTER identity its replies go to,
the authenticated key (``--auth``) and the source address it came from.  ``why_refused`` is a pure function of the seats
held and the newcomer: it caps sessions per identity, per key and per source address, and keeps the last few slots
for principals (the key under ``--auth``, else the source address) that hold none, so that one peer cannot lock
everyone else out.  ``stale`` names the seats to free: idle too long, or opened and never drafted within a short
time (an OPEN costs the edge a KV reservation; a peer that only opens is hoarding).
"""
from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Quotas:
    """Admission limits (ServeConfig's flags)."""

    max_sessions: int = 256  # sessions open at once, all peers together
    per_identity: int = 16  # sessions open at once per ROUTER identity (a UE process holds one per prompt)
    per_key: int = 128  # sessions open at once per authenticated client key (--auth)
    per_source: int = 128  # sessions open at once per source address (all loopback peers share 127.0.0.1)
    reserve: int = 8  # slots kept for principals holding no session (principal: key under --auth, else address)


@dataclass
class Seat:
    """One session's admission facts."""

    sid: str  # the UE's session id
    identity: bytes  # ROUTER identity its replies go to (the latest message's: a UE that redials gets a new one)
    key: str | None  # authenticated client key (ZAP User-Id); None without --auth
    source: str | None  # peer address of its OPEN's connection (None: not known)
    opened_s: float  # monotonic time of its OPEN, s
    token: str = field(default_factory=lambda: secrets.token_hex(16))  # 128 random bits: a guessed id gives nothing
    drafted: bool = False  # a DRAFT arrived for it

    @property
    def principal(self) -> str | None:
        """Who the reserve is fair between: the key under --auth, else the source address."""
        return self.key if self.key is not None else self.source


def why_refused(seats: Iterable[Seat], new: Seat, q: Quotas) -> str | None:
    """Why ``new`` may not open a session beside ``seats`` (None: it may)."""
    seats = list(seats)
    total = len(seats)
    if total >= q.max_sessions:
        return f"{total} sessions open (max {q.max_sessions})"
    checks = (("identity", lambda s: s.identity == new.identity, q.per_identity),
              ("client key", lambda s: new.key is not None and s.key == new.key, q.per_key),
              ("source address", lambda s: new.source is not None and s.source == new.source, q.per_source))
    for what, same, cap in checks:
        n = sum(1 for s in seats if same(s))
        if n >= cap:
            return f"{n} sessions open from this {what} (max {cap} each)"
    if total >= q.max_sessions - q.reserve and any(s.principal == new.principal for s in seats):
        return (f"{total} sessions open: the last {q.reserve} of {q.max_sessions} are kept for peers that hold none")
    return None


def stale(seats: dict[str, Seat], last_active_s: dict[str, float], now_s: float, idle_s: float,
          undrafted_s: float) -> list[str]:
    """Tokens of the seats to free: idle longer than ``idle_s``, or never drafted ``undrafted_s`` after their OPEN."""
    return [t for t, s in seats.items()
            if now_s - last_active_s.get(t, s.opened_s) > idle_s or (not s.drafted and now_s - s.opened_s > undrafted_s)]
