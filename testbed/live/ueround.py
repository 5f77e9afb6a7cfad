"""One round's exchange with the edge, exactly once: after a receive timeout (or a busy edge) the UE resends the same
DRAFT, which the edge answers from its cache; after an edge restart (ERROR ``unknown_session``) it re-OPENs the session
with the committed prefix and resends the DRAFT; all within the retry window (testbed/live/retry.py)."""
from __future__ import annotations

from dataclasses import dataclass

from protocols.ue_side import EdgeError, UESession
from protocols.wire import Message, MsgType
from testbed.live.client import UNKNOWN_SESSION, Client, open_session
from testbed.live.retry import RETRYABLE, Window

IN_PROGRESS = "in_progress"  # the edge's ERROR code for a retransmitted DRAFT still being verified: keep waiting


@dataclass
class RoundIO:
    """A round's traffic and times on the UE's clock."""

    up: int = 0  # bytes sent, on the wire
    down: int = 0  # bytes received, on the wire
    exchanges: int = 0  # request/reply exchanges
    ue_mid_s: float = 0.0  # UE work between a reply and the next request of the round, s
    t_first: float = 0.0  # perf_counter when the DRAFT was first sent, s
    t_last: float = 0.0  # perf_counter when the last reply arrived, s
    retries: int = 0  # resends of the DRAFT after a receive timeout or a busy edge
    resumed: int = 0  # re-OPENs of the session with its committed prefix (the edge had lost it)


def send_draft(client: Client, draft: Message) -> RoundIO:
    """Send a round's DRAFT; its tally so far."""
    io = RoundIO(up=client.send(draft), exchanges=1)
    io.t_first = client.t_sent
    return io


def finish_round(client: Client, sess: UESession, draft: Message, io: RoundIO) -> RoundIO:
    """Receive the round's replies until its VERDICT is committed, resending the DRAFT within the retry window."""
    window = Window(client.retry_s, f"round {draft.header['round']} of session {sess.sid} with the edge at "
                                    f"{client.endpoint}")
    while True:
        try:
            _replies(client, sess, io)
            return io
        except TimeoutError as e:
            client.retry(window, str(e))
            io.retries += 1
        except EdgeError as e:
            if e.code == UNKNOWN_SESSION:
                window.next_attempt(str(e))  # bounded: an edge that keeps losing the session ends the run
                open_session(client, sess)  # the committed prefix, the budget left, this round first
                draft.header.update(sess.token)  # the resumed session's new token
                io.resumed += 1
            elif e.code in RETRYABLE:
                client.retry(window, str(e))
                io.retries += 1
            else:
                raise
        io.up += client.send(draft)
        io.exchanges += 1


def _replies(client: Client, sess: UESession, io: RoundIO) -> None:
    """The round's replies (stale ones dropped): answer HIDDEN_REQ, commit the VERDICT."""
    index = sess.round.index
    while True:
        reply, nbytes = client.recv(sess.sid, index)
        io.down += nbytes
        io.t_last = client.t_received
        if reply.type == MsgType.ERROR and reply.header["code"] == IN_PROGRESS:
            continue
        nxt = sess.on_reply(reply)
        if nxt is None:
            return
        io.up += client.send(nxt)
        io.ue_mid_s += client.t_sent - io.t_last  # UE work between exchanges (decode, encode) is not link time
        io.exchanges += 1
