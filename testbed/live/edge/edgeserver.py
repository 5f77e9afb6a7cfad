"""The edge's message handling without sockets: ``EdgeServer.handle(peer, frames) -> reply frames``.

It admits sessions (testbed/live/edge/admission.py), runs each session's protocol (protocols/edge_side.py) on a
verification engine from the registry (wisv/serving/engine.py) or on a VerifySession of its own, batches concurrent
DRAFTs (testbed/live/edge/edgebatch.py) and answers REFERENCEs.  The socket loop around it is
testbed/live/edge/serve.py.
"""
from __future__ import annotations

import functools
import logging
import time

import numpy as np

from protocols.edge_draft import EdgeDraftConfig, EdgeDrafter
from protocols.edge_side import EdgeSession, ProtocolError
from protocols.handshake import Vocab
from protocols.stream import EdgeStream, decode_turn, edge_session
from protocols.wire import Message, MsgType, WireError, decode, encode, error_message, make
from testbed.live.common.auth import peer_address, user_id
from testbed.live.common.keepalive import Liveness
from testbed.live.edge import edgeengine
from testbed.live.edge.admission import (
    OpenLimits,
    Quotas,
    Seat,
    admit_kv,
    budget_refusal,
    draft_refusal,
    stale,
    vocab_check,
    why_refused,
)
from testbed.live.edge.intake import Bucket, caps, edge_limits
from testbed.live.edge.journal import Journal
from testbed.live.edge.references import Job, ReferenceCache, ReferenceWorker
from testbed.live.edge.replies import arrival, edge_settings, end_draft, reference_ok, with_stop_depth
from testbed.live.edge.serveconfig import ServeConfig
from wisv.decoding.sessions import VerifySession
from wisv.models.loader import vocab_facts
from wisv.serving.engine import EngineView
from wisv.serving.kvbudget import KVBudgetError, KVLedger, KVShape, session_tokens
from wisv.tasks.evaluate import eos_id, greedy_reference

log = logging.getLogger("testbed.serve")
INTERNAL_TEXT = "internal error on the edge (logged there); the session was closed"  # no internals to the peer


class EdgeServer:
    """Message handling without sockets: ``handle(peer, frames) -> reply frames``."""

    def __init__(self, cfg: ServeConfig, target, policy, tokenizer=None, head_desc: str | None = None):
        self.cfg, self.target, self.policy = cfg, target, policy
        self.vocab = Vocab(*vocab_facts(target, tokenizer))  # what OPEN's vocabulary facts are checked against
        self.tau = cfg.tau if cfg.tau is not None else policy.tau  # the policy's own unless --tau (wisv.head.policy)
        self.hidden_layer = policy.hidden_layer  # both sides record this layer for the head
        self.eos = eos_id(target)
        self.limits = edge_limits(int(target.config.vocab_size), cfg.max_draft_len, cfg.max_probe_bytes)
        self.caps = caps(self.limits)  # parts and bytes per message type (testbed/live/edge/intake.py)
        self.probes = Bucket(cfg.probe_rate_kb_s * 1e3, cfg.probe_burst_kb * 1e3)  # PONG bytes per peer
        self.sessions: dict[str, EdgeSession | EdgeStream] = {}  # session token -> session
        self.seats: dict[str, Seat] = {}  # session token -> who holds it (testbed/live/edge/admission.py)
        self.quotas = Quotas(cfg.max_sessions, cfg.sessions_per_identity, cfg.sessions_per_key,
                             cfg.sessions_per_source, cfg.reserved_sessions)
        self.peer_keys: dict[bytes, str | None] = {}  # peer -> the authenticated key (ZAP User-Id) it sends with
        self.peer_sources: dict[bytes, str | None] = {}  # peer -> the address its connection comes from
        self.engine, self.batcher = edgeengine.build(cfg, target, self.hidden_layer)
        self.pad_plan = edgeengine.pad_plan(cfg, self.engine)  # None: every verification pass as fed
        self.kv_shape, self.kv = KVShape.of(target), KVLedger(cfg.memory_budget_mb)  # reservations (no engine)
        self.open_limits = OpenLimits(max_draft_len=cfg.max_draft_len, max_session_tokens=cfg.max_session_tokens,
                                      context_tokens=getattr(target.config, "max_position_embeddings", None),
                                      max_context_tokens=cfg.max_context_tokens)
        self.held: list = []  # validated DRAFTs waiting for the batcher (peer, EdgeSession)
        self.streams: set[str] = set()  # tokens of the sessions with chunks to send (server-only; auto's runs)
        self.references = ReferenceCache(cfg.reference_cache)  # prompt -> target-only output (longest budget)
        self.worker: ReferenceWorker | None = None  # computes REFERENCEs off the loop (serve starts one); None: inline
        self.settings = edge_settings(cfg, self.tau, head_desc or cfg.head, self.hidden_layer,
                                      "h_draft" in policy.inputs)
        self.alive = Liveness(cfg.heartbeat_timeout_ms / 1e3)  # sessions kept alive by their UEs (keepalive.py)
        self.journal = Journal(cfg.journal) if cfg.journal else None  # what it commits (the chaos harness checks it)
        self.drafter = EdgeDrafter(EdgeDraftConfig(cfg.edge_draft, cfg.edge_draft_tokens, cfg.edge_draft_cache_mb)) \
            if cfg.edge_draft != "none" else None  # the edge's drafts, its sessions' index (protocols/edge_draft.py)

    def handle(self, peer: bytes, frames: list) -> list[bytes]:
        """Decode, dispatch and encode one reply; never raises for a peer's mistake."""
        self._note_keys([(peer, frames)])
        return self._guard(peer, frames, self._dispatch)

    def handle_many(self, items: list[tuple], one_batch: bool = False) -> list[tuple[bytes, list[bytes]]]:
        """Several messages ``(peer, frames[, arrival perf_counter s])`` at once; with batching their DRAFTs join
        the waiting ones and are verified together.  Without an arrival time a message arrives when handled.

        ``one_batch``: verify only the next batch and keep the rest waiting, so that the caller can add what arrived
        meanwhile before the scheduler picks again (the serving loop does this); otherwise verify until none waits."""
        self._note_keys(items)
        if self.batcher is None:
            replies = [(item[0], self._guard(item[0], item[1], self._dispatch, t0=arrival(item))) for item in items]
            return [(p, r) for p, r in replies if r is not None] + self._stream_turn()
        replies = []
        for item in items:
            peer, frames = item[:2]
            out = self._guard(peer, frames, self._hold_drafts, t0=arrival(item))
            if out is not None:
                (self.held if isinstance(out, EdgeSession) else replies).append((peer, out))
        self.held = [(p, s) for p, s in self.held if self.sessions.get(s.token) is s]  # closed meanwhile: drop
        while self.held:
            for peer, sess, block, dt, n in self._step():
                finish = functools.partial(self._finish_batched, sess, block, dt, n)
                replies.append((peer, self._guard(peer, None, finish, sess)))
            if one_batch:
                break
        return replies + self._stream_turn()

    def _stream_turn(self) -> list[tuple[bytes, list[bytes]]]:
        """One decode step of every stream, server-only's and auto's handed-over rounds (on the engine, batched, when
        batching), and the chunks due, each to its session's UE (protocols/stream.py, protocols/edge_run.py)."""
        live = [self.sessions[t] for t in self.streams if t in self.sessions and self.sessions[t].active]
        out = []
        for sess, reply in decode_turn(live, self.engine if self.batcher else None, self.cfg.max_batch):
            act = functools.partial(_stream_reply, reply)
            out.append((self.seats[sess.token].identity, self._guard(b"", None, act, sess)))
        self.streams = {s.token for s in live if s.active and s.token in self.sessions}  # not ended, nor dropped
        return out

    def _finish_batched(self, sess: EdgeSession, block, dt: float, n: int, *_) -> Message:
        """A batched DRAFT's reply (``_guard``'s act: its peer, message and arrival are not needed here)."""
        return self._suggest(sess, end_draft(sess, block, dt, n))

    def _suggest(self, sess: EdgeSession, reply: Message) -> Message:
        """The VERDICT with a suggested stop depth for the next block, when the batcher has a WDT predictor."""
        return with_stop_depth(reply, self.batcher.stop_depth(sess) if self.batcher else None)

    def _guard(self, peer: bytes, frames: list | None, act, sess: EdgeSession | None = None,
               t0: float | None = None):
        """Run ``act(peer, msg, t0)`` on the decoded frames (t0: arrival, default now); errors become ERROR replies
        (``sess``: the session a message-less ``act`` works for)."""
        t0 = time.perf_counter() if t0 is None else t0
        sid, token = (sess.sid, sess.token) if sess is not None else ("unknown", None)
        try:
            msg = decode(frames, self.limits) if frames is not None else None
            if msg is not None:
                sid, token = msg.session, msg.header.get("token")
            out = act(peer, msg, t0)
            if self.journal is not None and getattr(out, "type", None) in (MsgType.VERDICT, MsgType.CHUNK):
                self.journal.verdict(self.sessions.get(token), out.header["round"])
            return out if out is None or isinstance(out, EdgeSession) else encode(out)  # None: answered later
        except (WireError, ProtocolError, KVBudgetError) as e:
            return encode(error_message(sid, e.code, str(e)))
        except Exception:  # noqa: BLE001 - the server must keep serving other sessions
            log.exception("internal error handling a message from session %s", sid)
            if token in self.sessions and self.sessions[token].sid == sid:
                self._drop(token)
            return encode(error_message(sid, "internal", INTERNAL_TEXT))

    def _step(self) -> list:
        """Verify the next batch of held DRAFTs.  Should the batcher itself fail, the held DRAFTs fail with it (each
        gets an ERROR through the guard) and the edge goes on."""
        try:
            done, self.held = self.batcher.step(self.held)
        except Exception as e:  # noqa: BLE001 - logged by the guard, once per session
            done, self.held = [(peer, sess, e, 0.0, 0) for peer, sess in self.held], []
        return done

    def _note_keys(self, items: list[tuple]) -> None:
        """The authenticated key each peer's connection uses, from its messages' ZAP User-Id (None: no CURVE), and
        the address the connection comes from."""
        for item in items:
            self.peer_keys[item[0]] = user_id(item[1])
            self.peer_sources[item[0]] = peer_address(item[1])

    def busy(self, peer: bytes, frames: list) -> list[bytes]:
        """The reply to a message the receiver could not queue: ERROR ``busy`` naming its session (thread-safe)."""
        return self._guard(peer, frames, self._refuse_busy)

    def _refuse_busy(self, peer: bytes, msg: Message, t0: float) -> Message:
        self._kept_alive(peer, msg)  # a refused message still says its UE is alive
        raise ProtocolError("busy", f"the edge's queue is full ({self.cfg.inbox_max_msgs} messages): send it again")

    def _hold_drafts(self, peer: bytes, msg: Message, t0: float) -> Message | EdgeSession:
        """Validate and keep a DRAFT for the batcher; any other message is handled at once."""
        if msg.type != MsgType.DRAFT:
            return self._dispatch(peer, msg, t0)
        sess = self._session(peer, msg, t0)
        cached = sess.accept_draft(msg)  # a retransmitted DRAFT: its round's reply again, nothing verified
        return sess if cached is None else cached

    def _dispatch(self, peer: bytes, msg: Message, t0: float) -> Message:
        if msg.type == MsgType.PING:
            self._kept_alive(peer, msg)
            n = msg.header.get("reply_bytes", 0)
            if n and not self.probes.spend(peer, n):
                raise ProtocolError("busy", f"this peer asked for more PONG bytes than --probe-rate-kb-s "
                                            f"{self.cfg.probe_rate_kb_s:g} allows: probe again later")
            payload = np.zeros(n, np.uint8)
            return make(MsgType.PONG, msg.session, {"payload": payload}, seq=msg.header["seq"],
                        t_send=msg.header["t_send"])
        if msg.type == MsgType.OPEN:
            return self._open(peer, msg)
        if msg.type == MsgType.REFERENCE:
            return self._reference(peer, msg)
        sess = self._session(peer, msg, t0)
        if msg.type == MsgType.DRAFT:
            return sess.on_draft(msg)
        if msg.type == MsgType.HIDDEN:
            return sess.on_hidden(msg)
        if msg.type == MsgType.GENERATE:
            sess.on_generate(msg)  # a stream (server-only), or a drafting session's round handed over
            self.streams.add(sess.token)
            return None  # the chunks follow, one stream turn at a time
        if msg.type == MsgType.CLOSE:
            self._drop(msg.header["token"])
            log.info("closed session %s", msg.session)
            return make(MsgType.CLOSED, msg.session)
        raise ProtocolError("bad_type", f"the edge does not accept {msg.type.name} messages")

    def _session(self, peer: bytes, msg: Message, t0: float) -> EdgeSession:
        """The session a message names by its token (the peer's identity only routes the reply)."""
        token = msg.header.get("token")
        sess = self.sessions.get(token) if token else None
        if sess is None or sess.sid != msg.session:
            why = "with this token" if token else "(the message carries no token: OPEN_OK gives one)"
            raise ProtocolError("unknown_session", f"no open session {msg.session!r} {why}")
        seat = self.seats[token]
        if seat.key != self.peer_keys.get(peer):
            raise ProtocolError("forbidden", f"session {msg.session!r} was opened with another key")
        seat.identity, seat.drafted = peer, seat.drafted or msg.type in (MsgType.DRAFT, MsgType.GENERATE)  # replies
        #   follow the UE
        sess.last_active, sess.msg_t0 = time.monotonic(), t0
        self.alive.heard(token)
        return sess

    def _kept_alive(self, peer: bytes, msg: Message) -> None:
        """Note a keepalive (or any message) naming a session by its token, when it comes with the session's key."""
        seat = self.seats.get(msg.header.get("token") or "")
        if seat is not None and seat.sid == msg.session and seat.key == self.peer_keys.get(peer):
            self.alive.heard(seat.token)

    def _resumed(self, msg: Message, key: str | None) -> str | None:
        """The token of the session an OPEN replaces: the one it names by token, or under --auth the same key's
        session of the same id (a UE resuming after a reconnect); None: a new session."""
        token = msg.header.get("token")
        seat = self.seats.get(token) if token else None
        if seat is not None and seat.sid == msg.session and seat.key == key:
            return token
        if key is not None:
            return next((t for t, s in self.seats.items() if s.key == key and s.sid == msg.session), None)
        return None

    def _open(self, peer: bytes, msg: Message) -> Message:
        key = self.peer_keys.get(peer)
        old = self._resumed(msg, key)
        seat = Seat(msg.session, peer, key, self.peer_sources.get(peer), time.monotonic())
        if why := why_refused((s for t, s in self.seats.items() if t != old), seat, self.quotas):
            raise ProtocolError("busy", why)
        if why := draft_refusal(self.open_limits, msg.header["draft_len"]):
            raise ProtocolError("too_large", why)
        self._check_budget(msg.header["max_new_tokens"], len(msg.tensors["prompt"]))
        self._check_vocab(msg.header)
        if old is not None:
            self._drop(old)
        prompt = [int(t) for t in msg.tensors["prompt"]]
        n = session_tokens(len(prompt), msg.header["max_new_tokens"], msg.header["draft_len"])
        self._admit_kv(n, f"session {msg.session!r} ({n} positions: prompt, max_new_tokens, draft_len)", seat.token)
        try:
            verify = (EngineView(self.engine, seat.token, prompt) if self.engine is not None
                      else VerifySession(self.target, prompt, self.hidden_layer, pad_to=self.pad_plan))
            sess = edge_session(msg.session, verify, msg, self.policy, self.tau, self.eos, self.drafter)
        except Exception:
            self.kv.release(seat.token)
            raise
        sess.token, sess.sibling = seat.token, self.cfg.sibling
        self.sessions[seat.token], self.seats[seat.token] = sess, seat
        self.alive.expect(seat.token, msg.header.get("keepalive_ms"))
        if self.journal is not None:
            self.journal.opened(sess)
        log.info("open session %s from peer %s (%s, K=%d)", msg.session, peer.hex(), sess.protocol_name, sess.draft_len)
        vocab_hash = {"vocab_hash": self.vocab.hash} if self.vocab.hash else {}
        return make(MsgType.OPEN_OK, msg.session, target_hidden=int(self.target.config.hidden_size),
                    vocab_size=int(self.target.config.vocab_size), hidden_layer=self.hidden_layer, edge=self.settings,
                    token=seat.token, **vocab_hash, **sess.open_ok_fields())

    def _check_budget(self, max_new_tokens: int, prompt_len: int) -> None:
        if why := budget_refusal(self.open_limits, max_new_tokens, prompt_len):
            raise ProtocolError("too_large", why)

    def _admit_kv(self, tokens: int, what: str, key: tuple | None = None) -> None:
        admit_kv(self.kv, self.kv_shape.bytes_for(tokens), what, engine_makes_room=self.engine is not None, key=key)

    def _check_vocab(self, header: dict) -> None:
        if why := vocab_check(header, self.vocab):
            raise ProtocolError("vocab_mismatch", why)

    def _reference(self, peer: bytes, msg: Message) -> Message | None:
        """The target-only greedy output of the prompt, within a session's limits, from the cache; else computed by
        the worker (None: its reply comes later, from ``references_done``) or, without one, here."""
        n = msg.header["max_new_tokens"]
        self._check_budget(n, len(msg.tensors["prompt"]))
        self._check_vocab(msg.header)
        prompt = tuple(int(t) for t in msg.tensors["prompt"])
        tokens = self.references.get(prompt, n)
        if tokens is None:
            self._admit_kv(len(prompt) + n, f"REFERENCE of {len(prompt)} + {n} positions")
            if self.worker is not None:
                if why := self.worker.submit(Job(peer, msg.session, prompt, n)):
                    raise ProtocolError("busy", why)
                return None
            tokens = self.generate(list(prompt), n)
            self.references.put(prompt, n, tokens)
            return reference_ok(msg.session, tokens, cached=False)
        return reference_ok(msg.session, tokens, cached=True)

    def generate(self, prompt: list[int], n: int) -> list[int]:
        """The target-only greedy output: by the engine when it runs the target itself (vLLM), else here."""
        greedy = getattr(self.engine, "greedy", None)
        return greedy(prompt, n, self.eos) if greedy is not None else greedy_reference(self.target, prompt, n)

    def references_done(self) -> list[tuple[bytes, list[bytes]]]:
        """Replies to the REFERENCEs the worker finished since the last call."""
        out = []
        for job, result in self.worker.done() if self.worker is not None else ():
            if isinstance(result, Exception):
                log.error("REFERENCE of session %s failed", job.session, exc_info=result)
                out.append((job.peer, encode(error_message(job.session, "internal", INTERNAL_TEXT))))
            else:
                out.append((job.peer, encode(reference_ok(job.session, result, cached=False))))
        return out

    def _drop(self, token: str) -> None:
        sess = self.sessions.pop(token, None)
        self.streams.discard(token)
        self.seats.pop(token, None)
        self.kv.release(token)
        self.alive.forget(token)
        if sess is not None and self.journal is not None:
            self.journal.dropped(sess.sid, token)
        if sess is not None:
            sess.release()
            sess.verify.free()

    def drop_peer(self, peer: bytes) -> int:
        """Free every session (and KV cache) whose replies go to a peer whose connection ended; return how many."""
        mine = [t for t, seat in self.seats.items() if seat.identity == peer]
        for token in mine:
            self._drop(token)
        self.peer_keys.pop(peer, None)
        self.peer_sources.pop(peer, None)
        return len(mine)

    def sweep_silent(self) -> dict[bytes, int]:
        """Free the sessions whose UE stopped keeping them alive (testbed/live/common/keepalive.py);
        {peer: how many}."""
        freed: dict[bytes, int] = {}
        for token in self.alive.silent():
            if (seat := self.seats.get(token)) is not None:
                freed[seat.identity] = freed.get(seat.identity, 0) + 1
            self._drop(token)
        return freed

    def sweep(self, now: float | None = None) -> int:
        """Free sessions idle for longer than the timeout, or never drafted within ``--undrafted-timeout-s`` of
        their OPEN; return how many."""
        now = time.monotonic() if now is None else now
        active = {t: s.last_active for t, s in self.sessions.items()}
        gone = stale(self.seats, active, now, self.cfg.session_timeout_s, self.cfg.undrafted_timeout_s)
        for token in gone:
            self._drop(token)
        return len(gone)


def _stream_reply(reply: Message | Exception, *_) -> Message:
    """A stream turn's reply for a session (``_guard``'s act): its CHUNK, or its error raised."""
    if isinstance(reply, Exception):
        raise reply
    return reply
