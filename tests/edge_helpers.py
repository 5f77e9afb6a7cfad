"""Test helpers for an in-process EdgeServer: OPEN a UE session (keeping its token) and find a session by its id."""
from __future__ import annotations

from protocols.edge_side import EdgeSession
from protocols.schema import OpenOk
from protocols.ue_side import UESession
from protocols.wire import Limits, Message, MsgType, decode, encode


def open_on(server, peer: bytes, ue: UESession, limits: Limits, msg: Message | None = None) -> Message:
    """Send the UE's OPEN (or ``msg``) to ``server`` as ``peer``; the decoded reply (an OPEN_OK's token is kept)."""
    reply = decode(server.handle(peer, encode(msg or ue.open_message())), limits)
    if reply.type == MsgType.OPEN_OK:
        ue.check_open_ok(OpenOk.of(reply.header))
    return reply


def session_of(server, sid: str) -> EdgeSession:
    """The edge's session with this session id (the only one in these tests)."""
    return next(s for s in server.sessions.values() if s.sid == sid)


def token_of(server, sid: str) -> dict[str, str]:
    """``{"token": ...}`` of the edge's session ``sid``: header fields for a hand-made DRAFT, HIDDEN or CLOSE."""
    return {"token": session_of(server, sid).token}
