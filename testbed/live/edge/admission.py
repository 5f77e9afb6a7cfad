"""Fair admission of sessions on a shared edge: who holds a seat, and whether one more OPEN may have one.

A seat is a session's admission facts: its token (what its messages carry), the ROUTER identity its replies go to,
the authenticated key (``--auth``) and the source address it came from.  ``why_refused`` is a pure function of the seats
held and the newcomer: it caps sessions per identity, per key and per source address, and keeps the last few slots
for principals (the key under ``--auth``, else the source address) that hold none, so that one peer cannot lock
everyone else out.  ``stale`` names the seats to free: idle too long, or opened and never drafted within a short
time (an OPEN costs the edge a KV reservation; a peer that only opens is hoarding).

What one OPEN (or REFERENCE) may ask is checked here too, before anything is allocated: its block K and its
generation budget and context against ``OpenLimits`` (``draft_refusal``, ``budget_refusal``), its drafter's vocabulary
against the target's (``vocab_check``), and its KV cache against the memory budget (``admit_kv``).
"""
from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocols.handshake import Vocab, vocab_refusal
from wisv.serving.kvbudget import KVLedger, refusal


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
            if now_s - last_active_s.get(t, s.opened_s) > idle_s
            or (not s.drafted and now_s - s.opened_s > undrafted_s)]


@dataclass(frozen=True, kw_only=True)
class OpenLimits:
    """What one OPEN or REFERENCE may ask of this edge (ServeConfig's flags and the target's context)."""

    max_draft_len: int  # largest block K (--max-draft-len), tokens
    max_session_tokens: int  # largest generation budget max_new_tokens (--max-session-tokens), tokens
    context_tokens: int | None  # the target's context, max_position_embeddings (None: not known), tokens
    max_context_tokens: int | None  # largest prompt + max_new_tokens (--max-context-tokens; None: the target's), tokens


def draft_refusal(lim: OpenLimits, draft_len: int) -> str | None:
    """Why a block of ``draft_len`` tokens is too large for this edge (None: it is not)."""
    if draft_len > lim.max_draft_len:
        return f"draft_len {draft_len} > this edge's --max-draft-len {lim.max_draft_len}"
    return None


def budget_refusal(lim: OpenLimits, max_new_tokens: int, prompt_len: int) -> str | None:
    """Why a generation budget, or a context (prompt + budget), is more than this edge holds (None: it fits)."""
    if max_new_tokens > lim.max_session_tokens:
        return f"max_new_tokens {max_new_tokens} > this edge's --max-session-tokens {lim.max_session_tokens}"
    total = f"prompt {prompt_len} + max_new_tokens {max_new_tokens} = {prompt_len + max_new_tokens} tokens"
    if lim.context_tokens is not None and prompt_len + max_new_tokens > lim.context_tokens:
        return f"{total} > the target's context {lim.context_tokens} (max_position_embeddings)"
    if lim.max_context_tokens is not None and prompt_len + max_new_tokens > lim.max_context_tokens:
        return f"{total} > this edge's --max-context-tokens {lim.max_context_tokens}"
    return None


def vocab_check(header: dict, target: Vocab) -> str | None:
    """Why a drafter whose declared vocabulary (an OPEN's or REFERENCE's header) differs from the target's is refused
    (None: it matches, or the UE declares none)."""
    if "vocab_size" not in header:
        return None
    return vocab_refusal(Vocab(header["vocab_size"], header.get("vocab_hash")), target)


def admit_kv(kv: KVLedger, need_bytes: int, what: str, *, engine_makes_room: bool, key: object = None) -> None:
    """Refuse (KVBudgetError) a cache of ``need_bytes`` that cannot fit the budget, before allocating it: with an engine
    (``engine_makes_room``: it evicts idle caches per pass) it must fit alone; without, beside the reservations of the
    other sessions (``key``: reserve it for that session)."""
    if engine_makes_room:
        if (err := refusal(need_bytes, 0, kv.budget_mb, what)) is not None:
            raise err
    elif key is None:
        kv.check(need_bytes, what)
    else:
        kv.reserve(key, need_bytes, what)
