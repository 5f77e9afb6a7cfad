"""One UE round, one route: ``run_round`` takes a session from its draft to the round's committed record.

It hands the session (protocols/ue_side.py ``UESession.play_round``) the round's link over the client
(testbed/live/ue/client.py ``RoundLink``: sends, receives, resends within the retry window), once; the session drafts,
sends, drafts proactively while the edge verifies, answers the replies and commits the typed VERDICT.  From the
finished round and the link's counters it returns the round's RoundRow fields.  The walk of one round through the
files is in docs/architecture.md.  A protocol that generates alone (its description: server-only, on-device) plays a
chunk per round instead (protocols/ue_stream.py): ``run_chunk``."""
from __future__ import annotations

import time

from channel.csi import CSI
from protocols.ue_handover import EdgeRound
from protocols.ue_side import UESession
from testbed.live.ue.client import Client, RoundIO, RoundLink
from wisv.decoding.rejection import wasted_drafting
from wisv.timing.handover import HandOver


def run_round(client: Client, sess: UESession, csi: CSI | None, t0: float) -> dict:
    """One DRAFT/(HIDDEN_REQ/HIDDEN)/VERDICT exchange, its head and auto conditioned on ``csi``; returns the round's
    measurements (RoundRow fields; ``t0``: perf_counter when the prompt's OPEN went out)."""
    if not sess.proto.desc.speculative:
        return run_chunk(client, sess, csi, t0)
    t_start = time.perf_counter()
    n_before = len(sess.tokens)
    link = RoundLink(client, sess)
    r = sess.play_round(csi, link)
    if isinstance(r, EdgeRound):
        return _edge_round_row(r, link.io, t_start, t0)
    io, v = link.io, r.verdict
    n = len(r.draft.tokens)
    wdt, t_wdt = wasted_drafting(n, v.n_accepted, r.t_draft_s / max(1, n))  # WISP WDT
    t_edge = v.t_edge_s
    edge = {"edge_drafted": v.edge_drafted, "edge_accepted": len(v.edge_tokens)} if v.edge_drafted is not None else {}
    return {"round": r.index, "protocol": r.protocol, "drafted": n, "accepted": v.n_accepted + len(v.edge_tokens),
            "mismatches": v.mismatches, "queried": v.queried, "exchanges": io.exchanges,
            "uplink_bytes": io.up, "downlink_bytes": io.down, "t_draft_s": r.t_draft_s,
            "t_comm_s": (io.t_last - io.t_first) - (t_edge + io.ue_mid_s), "t_verify_s": v.t_verify_s,
            "t_head_s": v.t_head_s, "t_round_s": time.perf_counter() - t_start, "wdt_tokens": wdt,
            "proactive_drafted": len(r.proactive.tokens) if r.proactive is not None else 0,
            "proactive_reused": r.reused, "t_proactive_s": r.t_proactive_s, "t_wdt_s": t_wdt,
            "committed": len(sess.tokens) - n_before, "t_edge_s": t_edge, "retries": io.retries,
            "resumed": io.resumed, "window_k": r.window, "t_arrival_s": io.t_last - t0,
            "edge_alone": False if sess.proto.desc.chooses else None, **edge, **predictions(r.choice), **r.columns}


def _edge_round_row(r: EdgeRound, io: RoundIO, t_start: float, t0: float) -> dict:
    """The RoundRow fields of a round auto handed to the edge: no draft of the UE's; the CHUNK's tokens committed;
    ``accepted`` is 0 (nothing was drafted), the edge's own drafts (--edge-draft) are ``edge_drafted`` and
    ``edge_accepted``.  Link time is known only for a run's part whose request went out (its first, or one asked
    for again): its round trip less the edge's time."""
    return {"round": r.index, "protocol": r.protocol, "drafted": 0, "accepted": 0, "exchanges": io.exchanges,
            "uplink_bytes": io.up, "downlink_bytes": io.down, "t_draft_s": 0.0, "t_verify_s": r.t_decode_s,
            "t_comm_s": (io.t_last - io.t_first) - r.t_edge_s if io.exchanges else None, "t_edge_s": r.t_edge_s,
            "t_round_s": time.perf_counter() - t_start, "committed": len(r.tokens), "retries": io.retries,
            "resumed": io.resumed, "t_arrival_s": io.t_last - t0, "edge_alone": True, "edge_drafted": r.drafted,
            "edge_accepted": r.accepted, **predictions(r.choice), **({"lookup_stopped": True} if r.stopped else {}),
            **({"lookup_stop_streak": r.choice.stop_streak} if r.choice.stop else {})}


def predictions(choice: HandOver | None) -> dict:
    """The RoundRow fields of auto's hand-over choice before the round: its two predicted costs per token."""
    if choice is None:
        return {}
    return {"pred_spec_s_per_token": choice.spec_s_per_token, "pred_edge_s_per_token": choice.edge_s_per_token}


def run_chunk(client: Client, sess: UESession, csi: CSI | None, t0: float) -> dict:
    """One chunk of a protocol that generates alone: the edge's next CHUNK over the link (server-only), or the
    drafter's next chunk here (on-device); its RoundRow fields.  Link time is known only for the round whose request
    went out (the GENERATE's): its round trip less the edge's time."""
    t_start = time.perf_counter()
    link = RoundLink(client, sess) if sess.proto.desc.edge_rounds else None
    c = sess.play_round(csi, link)
    io = link.io if link is not None else RoundIO(t_first=t_start, t_last=time.perf_counter())
    asked = io.exchanges > 0 and c.t_edge_s is not None
    return {"round": c.index, "protocol": c.protocol, "drafted": c.drafted, "accepted": c.accepted,
            "exchanges": io.exchanges,
            "uplink_bytes": io.up, "downlink_bytes": io.down, "t_draft_s": c.t_gen_s, "t_verify_s": c.t_decode_s,
            "t_comm_s": (io.t_last - io.t_first) - c.t_edge_s if asked else None, "t_edge_s": c.t_edge_s,
            "t_round_s": time.perf_counter() - t_start, "committed": len(c.tokens), "retries": io.retries,
            "resumed": io.resumed, "batch": c.batch, "t_arrival_s": io.t_last - t0}
