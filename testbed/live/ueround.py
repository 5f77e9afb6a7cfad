"""One UE round, one route: ``run_round`` takes a session from its draft to the round's committed record.

It drafts (the session's protocol: protocols/ue_side.py), sends the DRAFT, drafts proactively while the edge verifies
(SpecEdge), receives the replies (answering HIDDEN_REQ), commits the typed VERDICT and returns the round's RoundRow
fields.  The exchange happens exactly once: after a receive timeout (or a busy edge) the UE resends the same DRAFT,
which the edge answers from its cache; after an edge restart (ERROR ``unknown_session``) it re-OPENs the session with
the committed prefix and resends the DRAFT; all within the retry window (testbed/live/retry.py).  The walk of one
round through the files is in docs/architecture.md."""
from __future__ import annotations

import time
from dataclasses import dataclass

from channel.csi import CSI

from protocols.ue_side import EdgeError, UESession
from protocols.wire import Message, MsgType
from testbed.live.client import UNKNOWN_SESSION, Client, open_session
from testbed.live.retry import RETRYABLE, Window
from wisv.decoding.rejection import wasted_drafting
from wisv.serving.wdt import confidence_summary

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


def run_round(client: Client, sess: UESession, csi: CSI | None) -> dict:
    """One DRAFT/(HIDDEN_REQ/HIDDEN)/VERDICT exchange, its head and auto conditioned on ``csi``; returns the round's
    measurements (RoundRow fields)."""
    t_start = time.perf_counter()
    n_before = len(sess.tokens)
    msg = sess.next_draft(csi)
    io = RoundIO(up=client.send(msg), exchanges=1)
    io.t_first = client.t_sent
    t_pro = time.perf_counter()
    n_pro = sess.draft_proactively(client.reply_waiting)  # SpecEdge: overlaps the link and the verification
    t_pro = time.perf_counter() - t_pro
    finish_round(client, sess, msg, io)  # resends and resumes within the retry window
    r, v = sess.round, sess.round.verdict
    n = len(r.draft.tokens)
    wdt, t_wdt = wasted_drafting(n, v.n_accepted, r.t_draft_s / max(1, n))  # WISP WDT
    t_edge = v.t_edge_s
    return {"round": r.index, "protocol": r.protocol, "drafted": n, "accepted": v.n_accepted,
            "mismatches": v.mismatches, "queried": v.queried, "exchanges": io.exchanges,
            "uplink_bytes": io.up, "downlink_bytes": io.down, "t_draft_s": r.t_draft_s,
            "t_comm_s": (io.t_last - io.t_first) - (t_edge + io.ue_mid_s), "t_verify_s": v.t_verify_s,
            "t_head_s": v.t_head_s, "t_round_s": time.perf_counter() - t_start, "wdt_tokens": wdt,
            "proactive_drafted": n_pro, "proactive_reused": r.reused, "t_proactive_s": t_pro, "t_wdt_s": t_wdt,
            "committed": len(sess.tokens) - n_before, "t_edge_s": t_edge, "retries": io.retries,
            "resumed": io.resumed, "window_k": r.window, **_tree_columns(r), **_confidence_columns(r)}


def _confidence_columns(r) -> dict:
    """The block's draft-confidence summary (RoundRow draft_* fields: the WDT predictor's training data)."""
    f = r.draft.features
    return confidence_summary(f[:, :3].numpy()) if r.tree is None and f is not None and len(f) else {}


def _tree_columns(r) -> dict:
    """The tree protocol's RoundRow fields (none for a chain round)."""
    if r.tree is None:
        return {}
    return {"tree_size": len(r.tree.tree), "tree_depth": r.tree.tree.depth, "accepted_depth": r.verdict.n_accepted}


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
