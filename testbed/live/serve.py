"""Edge server: a ZeroMQ ROUTER serving many UE sessions, each with its own target KV cache.

Usage: ``python -m testbed.serve --bind tcp://0.0.0.0:5555 [--auth KEYS] [--target DIR] [--head none]``
Prints ``READY <endpoint>`` once listening.  A bad message gets an ERROR reply naming the problem;
every other session keeps being served.  Sessions are freed on CLOSE, after ``--session-timeout-s`` idle, or when
their peer's connection ends (closed, or silent past ``--heartbeat-timeout-ms``: testbed/live/liveness.py).
``--auth DIR`` (keys from ``python -m testbed.keys``) requires CurveZMQ and accepts only the client keys listed in
DIR/clients; a session is bound to the key that opened it (testbed/live/auth.py).
OPEN is refused when the UE's drafter does not share the target's tokenizer (size and hash of the vocabulary) or
its hidden size does not fit the decision head, or when its prompt plus max_new_tokens exceeds the target's context
(or ``--max-context-tokens``), or when its KV cache (prompt + max_new_tokens + draft_len positions) cannot fit
``--memory-budget-mb`` (ERROR ``kv_budget``, before anything is allocated: without the batching engine, beside the
other sessions' reservations; with it, alone, as the engine makes room per pass); OPEN_OK reports the edge's settings
(head, tau, target, batching).  An internal error is logged with its traceback here; the peer gets a generic ERROR.
REFERENCE asks for the target-only greedy output of a prompt (what lossless protocols must reproduce), cached.
``--engine vllm`` verifies through vLLM instead of our engine (wisv/serving/vllm_engine.py, docs/engines.md): the
edge then holds only the target's config and LM head (``TargetFacts``), and REFERENCE runs through vLLM too.
"""
from __future__ import annotations

import ctypes
import gc
import logging
import resource
import signal
import socket
import sys
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import zmq

import config
from channel.capture import capturing, iface_for
from protocols.edge_side import EdgeSession, ProtocolError
from protocols.handshake import Vocab, vocab_refusal
from protocols.wire import WIRE_VERSION, Message, MsgType, WireError, decode, encode, error_message, make
from testbed.common.heads import load_policy
from testbed.live.admission import Quotas, Seat, stale, why_refused
from testbed.live.auth import open_bind_warning, peer_address, serve_curve, user_id
from testbed.live.edgebatch import DraftBatcher
from testbed.live.inbox import MAX_QUEUE_MSGS, PEER_QUEUE_BYTES, SWITCH_INTERVAL_S, TOTAL_QUEUE_BYTES, Direct, Inbox
from testbed.live.intake import Bucket, caps, edge_limits
from testbed.live.liveness import HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS, Heartbeat, PeerWatch
from testbed.live.ratelog import limit as rate_limit_warnings
from testbed.live.references import Job, ReferenceCache, ReferenceWorker
from testbed.live.sockbounds import bound_socket
from wisv.decoding.sessions import VerifySession
from wisv.models.loader import DTYPE_CHOICES, builtin_paths, load_model, load_tokenizer, resolve_dtype, vocab_facts
from wisv.serving.batchverify import BatchVerifier, EngineConfig, EngineView
from wisv.serving.estimator import EstimatorProfile
from wisv.serving.kvbudget import KVBudgetError, KVLedger, KVShape, refusal, session_tokens
from wisv.serving.scheduler import LOST_ORDER_CHOICES, SCHEDULER_CHOICES
from wisv.serving.engine import ENGINE_CHOICES, VerifyEngine
from wisv.serving.vllm_engine import TargetFacts, VllmConfig, VllmVerifier
from wisv.serving.wdt import WDTPredictor
from wisv.tasks.evaluate import eos_id, greedy_reference
from wisv.pairs import apply_pair

log = logging.getLogger("testbed.serve")
REFERENCE_POLL_S = 0.005  # while the worker computes, the loop looks for its results at least this often, s
INTERNAL_TEXT = "internal error on the edge (logged there); the session was closed"  # no internals to the peer

PROG = "python -m testbed.serve"  # as users type it: --help and error lines

@dataclass
class ServeConfig:
    """Edge server settings."""

    bind: str = field(default="tcp://127.0.0.1:5555", metadata={
        "pattern": r"tcp://[^:/\s]+:\d+",
        "example": "tcp://0.0.0.0:5556"})  # endpoint to bind, tcp://HOST:PORT (0.0.0.0: all interfaces; port 0: any)
    target: str | None = None  # local HF directory of the target; None = built-in toy target
    pair: str | None = None  # named pair: toy | smollm2 (python -m wisv.pairs build NAME); --drafter/--target win
    device: str = "cpu"  # torch device of the target
    engine: str = field(default="transformers", metadata={
        "choices": ENGINE_CHOICES})  # verification engine: transformers (ours) | vllm (docs/engines.md)
    dtype: str = field(default="auto", metadata={
        "choices": DTYPE_CHOICES})  # the target's weights (auto: fp32 on CPU, bf16/fp16 on CUDA)
    head: str = "default"  # decision head for fh/sh/auto: default | none | accept-all | PATH (a trained head dir)
    tau: float | None = field(default=None, metadata={
        "min": 0, "max": 1})  # decision threshold, reject a mismatch iff p >= tau (None: the head's own tau)
    session_timeout_s: float = field(default=120.0, metadata={"above": 0})  # idle sessions are freed after this long, s
    max_sessions: int = field(default=256, metadata={"min": 1})  # OPEN beyond this many live sessions is refused
    sessions_per_identity: int = field(default=16, metadata={
        "min": 1})  # OPEN beyond this many live sessions of one socket identity is refused
    sessions_per_key: int = field(default=128, metadata={
        "min": 1})  # OPEN beyond this many live sessions of one client key (--auth) is refused
    sessions_per_source: int = field(default=128, metadata={
        "min": 1})  # OPEN beyond this many live sessions from one source address is refused
    reserved_sessions: int = field(default=8, metadata={
        "min": 0})  # the last slots of --max-sessions go only to peers (key, else address) holding none
    undrafted_timeout_s: float = field(default=15.0, metadata={
        "above": 0})  # a session that has sent no DRAFT this long after its OPEN is freed, s
    max_draft_len: int = field(default=64, metadata={"min": 1})  # largest accepted block K, tokens
    batch_verify: bool = False  # verify concurrent DRAFTs of many sessions in one target pass (wisv/serving/batchverify.py)
    scheduler: str = field(default="fcfs", metadata={"choices": SCHEDULER_CHOICES})  # batch selection (slo: WISP)
    max_batch: int = field(default=16, metadata={"min": 1})  # most requests in one verification pass
    kv_reuse: bool = True  # --no-kv-reuse: recompute each prefix every round (SLED baseline; uses the engine)
    memory_budget_mb: float = field(default=2048.0, metadata={
        "above": 0})  # cap on all sessions' KV caches together, checked before allocating, MB
    estimator: str | None = None  # verification-time profile JSON from testbed.profile (needed by --scheduler slo)
    guard_ms: float = field(default=0.0, metadata={
        "min": 0})  # slo: guard time delta (LST = deadline - v - delta) absorbing estimator error, ms
    lost_order: str = field(default="last",
                            metadata={"choices": LOST_ORDER_CHOICES})  # slo: lost requests go last or by EDF (paper)
    slack_ms: float | None = field(default=None, metadata={
        "min": 0})  # slo: time a batch keeps before its earliest feasible deadline, ms (None: guard_ms)
    wdt_predictor: str | None = None  # slo: g_i from this WDT predictor (scripts/wdt_predictor.py; None: running mean)
    arrival_reserve: bool = True  # slo: no batch so long that a tight request arriving meanwhile must miss (off: paper)
    max_session_tokens: int = field(default=4096, metadata={
        "min": 1})  # largest generation budget (max_new_tokens) a session or REFERENCE may ask, tokens
    reference_cache: int = field(default=4096, metadata={
        "min": 0})  # target-only outputs kept for REFERENCE requests (least recently used dropped), prompts
    max_context_tokens: int | None = field(default=None, metadata={
        "min": 1})  # largest prompt + max_new_tokens asked (None: the target's context), tokens
    socket_hwm_msgs: int = field(default=16, metadata={
        "min": 0})  # ZeroMQ send/receive high-water mark of the ROUTER, per peer, messages
    inbox_max_msgs: int = field(default=MAX_QUEUE_MSGS, metadata={
        "min": 1})  # batching: arrivals queued for the serving loop; beyond, ERROR busy, messages
    inbox_peer_mb: float = field(default=PEER_QUEUE_BYTES / 2**20, metadata={
        "above": 0})  # batching: bytes one peer's queued arrivals may hold, MB
    inbox_total_mb: float = field(default=TOTAL_QUEUE_BYTES / 2**20, metadata={
        "above": 0})  # batching: bytes all queued arrivals may hold, MB
    max_probe_bytes: int = field(default=2**20, metadata={
        "min": 0})  # largest PING payload and PONG reply_bytes (a UE's adaptive probes reach 1 MiB), bytes
    probe_rate_kb_s: float = field(default=1024.0, metadata={
        "min": 0})  # PONG payload bytes one peer may ask for per second, beyond a burst, KB/s
    probe_burst_kb: float = field(default=4096.0, metadata={
        "min": 0})  # PONG payload bytes one peer may ask for at once, KB
    handshake_ivl_ms: int = field(default=5000, metadata={
        "min": 0})  # a connection that has not finished its ZMTP/CURVE handshake by then is closed, ms
    heartbeat_ivl_ms: int = field(default=HEARTBEAT_IVL_MS, metadata={
        "min": 0})  # unused: the ROUTER sends no PINGs (libzmq abort; UEs' TTL is used), ms
    heartbeat_timeout_ms: int = field(default=HEARTBEAT_TIMEOUT_MS, metadata={
        "min": 0})  # a peer silent this long after a PING is dropped, sessions freed, ms
    auth: str | None = None  # key dir from testbed.keys: require CURVE, accept only DIR/clients/*.key (None: anyone)
    capture: str | None = None  # record a pcap of the edge's traffic here (root; tcpdump, else scapy)
    capture_iface: str | None = None  # interface to capture on (None: the one of --bind's address; 0.0.0.0: give it)
    vllm: VllmConfig = field(default_factory=VllmConfig)  # --engine vllm: the engine options passed to vLLM


class EdgeServer:
    """Message handling without sockets: ``handle(peer, frames) -> reply frames``."""

    def __init__(self, cfg: ServeConfig, target, policy, tokenizer=None, head_desc: str | None = None):
        self.cfg, self.target, self.policy = cfg, target, policy
        self.vocab = Vocab(*vocab_facts(target, tokenizer))  # what OPEN's vocabulary facts are checked against
        head_cfg = getattr(policy, "cfg", None)  # a trained head's HeadConfig; None for the fixed policies
        self.tau = cfg.tau if cfg.tau is not None else getattr(head_cfg, "tau", 0.5)
        self.hidden_layer = getattr(head_cfg, "hidden_layer", -1)  # both sides record this layer for the head
        self.eos = eos_id(target)
        self.limits = edge_limits(int(target.config.vocab_size), cfg.max_draft_len, cfg.max_probe_bytes)
        self.caps = caps(self.limits)  # parts and bytes each message type may have (testbed/live/intake.py)
        self.probes = Bucket(cfg.probe_rate_kb_s * 1e3, cfg.probe_burst_kb * 1e3)  # PONG bytes per peer
        self.sessions: dict[str, EdgeSession] = {}  # session token -> session
        self.seats: dict[str, Seat] = {}  # session token -> who holds it (testbed/live/admission.py)
        self.quotas = Quotas(cfg.max_sessions, cfg.sessions_per_identity, cfg.sessions_per_key,
                             cfg.sessions_per_source, cfg.reserved_sessions)
        self.peer_keys: dict[bytes, str | None] = {}  # peer -> the authenticated key (ZAP User-Id) it sends with
        self.peer_sources: dict[bytes, str | None] = {}  # peer -> the address its connection comes from
        self.engine, self.batcher = _engine(cfg, target, self.hidden_layer)
        self.kv_shape, self.kv = KVShape.of(target), KVLedger(cfg.memory_budget_mb)  # reservations (no engine)
        self.held: list = []  # validated DRAFTs waiting for the batcher (peer, EdgeSession)
        self.references = ReferenceCache(cfg.reference_cache)  # prompt -> target-only output (longest budget)
        self.worker: ReferenceWorker | None = None  # computes REFERENCEs off the loop (serve starts one); None: inline
        self.settings = edge_settings(cfg, self.tau, head_desc or cfg.head, self.hidden_layer)

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
            replies = [(item[0], self._guard(item[0], item[1], self._dispatch, t0=_arrival(item))) for item in items]
            return [(p, r) for p, r in replies if r is not None]
        replies = []
        for item in items:
            peer, frames = item[:2]
            out = self._guard(peer, frames, self._hold_drafts, t0=_arrival(item))
            if out is not None:
                (self.held if isinstance(out, EdgeSession) else replies).append((peer, out))
        self.held = [(p, s) for p, s in self.held if self.sessions.get(s.token) is s]  # closed meanwhile: drop
        while self.held:
            for peer, sess, block, dt, n in self._step():
                finish = lambda *_: self._suggest(sess, _end_draft(sess, block, dt, n))  # noqa: E731
                replies.append((peer, self._guard(peer, None, finish, sess)))
            if one_batch:
                break
        return replies

    def _suggest(self, sess: EdgeSession, reply: Message) -> Message:
        """The VERDICT with a suggested stop depth for the next block, when the batcher has a WDT predictor."""
        return _with_stop_depth(reply, self.batcher.stop_depth(sess) if self.batcher else None)

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
        seat.identity, seat.drafted = peer, seat.drafted or msg.type == MsgType.DRAFT  # replies follow the UE
        sess.last_active, sess.msg_t0 = time.monotonic(), t0
        return sess

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
        if msg.header["draft_len"] > self.cfg.max_draft_len:
            raise ProtocolError("too_large", f"draft_len {msg.header['draft_len']} > this edge's --max-draft-len "
                                             f"{self.cfg.max_draft_len}")
        self._check_budget(msg.header["max_new_tokens"], len(msg.tensors["prompt"]))
        self._check_vocab(msg.header)
        if old is not None:
            self._drop(old)
        prompt = [int(t) for t in msg.tensors["prompt"]]
        n = session_tokens(len(prompt), msg.header["max_new_tokens"], msg.header["draft_len"])
        self._admit_kv(n, f"session {msg.session!r} ({n} positions: prompt, max_new_tokens, draft_len)", seat.token)
        try:
            verify = (EngineView(self.engine, seat.token, prompt) if self.engine is not None
                      else VerifySession(self.target, prompt, self.hidden_layer))
            sess = EdgeSession(msg.session, verify, msg, self.policy, self.tau, self.eos)
        except Exception:
            self.kv.release(seat.token)
            raise
        sess.token = seat.token
        self.sessions[seat.token], self.seats[seat.token] = sess, seat
        log.info("open session %s from peer %s (%s, K=%d)", msg.session, peer.hex(), sess.protocol_name, sess.draft_len)
        vocab_hash = {"vocab_hash": self.vocab.hash} if self.vocab.hash else {}
        return make(MsgType.OPEN_OK, msg.session, target_hidden=int(self.target.config.hidden_size),
                    vocab_size=int(self.target.config.vocab_size), hidden_layer=self.hidden_layer, edge=self.settings,
                    token=seat.token, **vocab_hash)

    def _check_budget(self, max_new_tokens: int, prompt_len: int) -> None:
        """Refuse, before any work, a generation budget or a context (prompt + budget) this edge cannot hold."""
        if max_new_tokens > self.cfg.max_session_tokens:
            raise ProtocolError("too_large", f"max_new_tokens {max_new_tokens} > this edge's --max-session-tokens "
                                             f"{self.cfg.max_session_tokens}")
        total = f"prompt {prompt_len} + max_new_tokens {max_new_tokens} = {prompt_len + max_new_tokens} tokens"
        context = getattr(self.target.config, "max_position_embeddings", None)
        if context is not None and prompt_len + max_new_tokens > context:
            raise ProtocolError("too_large", f"{total} > the target's context {context} (max_position_embeddings)")
        cap = self.cfg.max_context_tokens
        if cap is not None and prompt_len + max_new_tokens > cap:
            raise ProtocolError("too_large", f"{total} > this edge's --max-context-tokens {cap}")

    def _admit_kv(self, tokens: int, what: str, key: tuple | None = None) -> None:
        """Refuse (KVBudgetError) a cache of ``tokens`` positions that cannot fit the budget, before allocating it:
        with the engine it must fit alone (the engine evicts idle caches per pass); without, beside the reservations
        of the other sessions (``key``: reserve it for that session)."""
        need = self.kv_shape.bytes_for(tokens)
        if self.engine is not None:
            err = refusal(need, 0, self.cfg.memory_budget_mb, what)
            if err is not None:
                raise err
        elif key is None:
            self.kv.check(need, what)
        else:
            self.kv.reserve(key, need, what)

    def _check_vocab(self, header: dict) -> None:
        """Refuse a drafter whose declared vocabulary differs from the target's (a UE that declares none: unchecked)."""
        if "vocab_size" not in header:
            return
        why = vocab_refusal(Vocab(header["vocab_size"], header.get("vocab_hash")), self.vocab)
        if why:
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
        self.seats.pop(token, None)
        self.kv.release(token)
        if sess is not None:
            sess.verify.free()

    def drop_peer(self, peer: bytes) -> int:
        """Free every session (and KV cache) whose replies go to a peer whose connection ended; return how many."""
        mine = [t for t, seat in self.seats.items() if seat.identity == peer]
        for token in mine:
            self._drop(token)
        self.peer_keys.pop(peer, None)
        self.peer_sources.pop(peer, None)
        return len(mine)

    def sweep(self, now: float | None = None) -> int:
        """Free sessions idle for longer than the timeout, or never drafted within ``--undrafted-timeout-s`` of
        their OPEN; return how many."""
        now = time.monotonic() if now is None else now
        active = {t: s.last_active for t, s in self.sessions.items()}
        gone = stale(self.seats, active, now, self.cfg.session_timeout_s, self.cfg.undrafted_timeout_s)
        for token in gone:
            self._drop(token)
        return len(gone)


def edge_settings(cfg: ServeConfig, tau: float, head: str, hidden_layer: int) -> dict:
    """The settings an edge reports in OPEN_OK (a run records them in config.json)."""
    vllm = {f"vllm_{k}": v for k, v in asdict(cfg.vllm).items()} if cfg.engine == "vllm" else {}  # flat on the wire
    return {"target": cfg.target or "built-in", "head": head, "tau": float(tau), "hidden_layer": hidden_layer,
            "engine": cfg.engine, **vllm, "device": cfg.device, "dtype": cfg.dtype, "max_draft_len": cfg.max_draft_len, "max_session_tokens": cfg.max_session_tokens,
            "batch_verify": cfg.batch_verify, "scheduler": cfg.scheduler, "max_batch": cfg.max_batch,
            "kv_reuse": cfg.kv_reuse, "estimator": cfg.estimator, "wire_version": WIRE_VERSION}


def reference_ok(session: str, tokens: list[int], cached: bool) -> Message:
    return make(MsgType.REFERENCE_OK, session, {"tokens": np.asarray(tokens, np.int32)}, cached=cached)  # [n]


def _with_stop_depth(reply: Message, depth: int | None) -> Message:
    """A VERDICT with the WDT predictor's suggested depth for the session's next block (when it has one)."""
    if depth is not None and reply.type == MsgType.VERDICT and not reply.header.get("done"):
        reply.header["stop_depth"] = depth
    return reply


def _arrival(item: tuple) -> float | None:
    """The arrival time of a ``handle_many`` item, if it carries one."""
    return item[2] if len(item) > 2 else None


def _end_draft(sess: EdgeSession, block, dt: float, batch: int) -> Message:
    """Finish a held DRAFT with its batched block, or fail it with the batch's error."""
    if isinstance(block, Exception):
        sess.abort_draft()
        raise block
    return sess.end_draft(block, dt, batch)


def _engine(cfg: ServeConfig, target, hidden_layer: int) -> tuple[VerifyEngine | None, DraftBatcher | None]:
    """The engine (vLLM with --engine vllm; ours with --batch-verify or --no-kv-reuse, else none: a VerifySession per
    session) and, when batching, its batcher."""
    if cfg.engine == "vllm":
        engine = vllm_engine(cfg, target, hidden_layer)
    elif not cfg.batch_verify and cfg.kv_reuse:
        return None, None
    else:
        engine = BatchVerifier(target, EngineConfig(kv_reuse=cfg.kv_reuse, session_timeout_s=cfg.session_timeout_s,
                                                    memory_budget_mb=cfg.memory_budget_mb, hidden_layer=hidden_layer))
    if not cfg.batch_verify:
        return engine, None
    est = EstimatorProfile.load(cfg.estimator) if cfg.estimator else None
    slack = None if cfg.slack_ms is None else cfg.slack_ms / 1e3
    wdt = WDTPredictor.load(cfg.wdt_predictor) if cfg.wdt_predictor else None
    return engine, DraftBatcher(engine, cfg.scheduler, cfg.max_batch, est, cfg.guard_ms / 1e3, cfg.lost_order, slack,
                                cfg.arrival_reserve, wdt)


def vllm_engine(cfg: ServeConfig, target, hidden_layer: int) -> VllmVerifier:
    """The vLLM engine over the loaded target's directory, with the target's LM head (--dtype and
    --memory-budget-mb passed through; --no-kv-reuse turns prefix caching off)."""
    head = target.get_output_embeddings()
    return VllmVerifier(str(target.name_or_path), head.weight, cfg.vllm, lm_head_bias=getattr(head, "bias", None),
                        dtype=str(resolve_dtype(cfg.dtype, cfg.device)).removeprefix("torch."),
                        kv_cache_mb=cfg.memory_budget_mb, prefix_caching=cfg.kv_reuse, hidden_layer=hidden_layer,
                        session_timeout_s=cfg.session_timeout_s)


def serve(cfg: ServeConfig, ready=print) -> None:
    """Load the target, bind, and serve until SIGINT/SIGTERM."""
    torch.set_num_threads(1)
    cfg = apply_pair(cfg, drafter=None)
    check_free(cfg.bind)  # a port in use fails now, not after loading the target
    path = cfg.target or builtin_paths()[1]
    dtype = resolve_dtype(cfg.dtype, cfg.device)
    target = (TargetFacts(path, cfg.device, dtype) if cfg.engine == "vllm"  # vLLM runs it: its facts and LM head here
              else load_model(Path(path), "target", cfg.device, dtype))
    policy, tau, desc = load_policy(cfg.head, cfg.tau, cfg.target, int(target.config.hidden_size))
    print(f"edge: decision head {desc}", flush=True)
    gc.collect()
    gc.freeze()  # the loaded model's objects leave the GC's generations: no ~0.3 s full collection mid-run
    server = EdgeServer(replace(cfg, tau=tau), target, policy, load_tokenizer(Path(path), "target"), desc)
    raise_fd_limit()
    ctx = zmq.Context()
    sock = bound_socket(ctx.socket(zmq.ROUTER), server.limits, cfg.socket_hwm_msgs)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.HANDSHAKE_IVL, cfg.handshake_ivl_ms)  # half-open connections do not hold their fd for long
    # the ROUTER sends no PINGs of its own: libzmq 4.3.5 aborts (!_io_error, stream_engine_base.cpp:310) when a ROUTER
    # that heartbeats is flooded past its receive high-water mark by peers that then hang up (issue 27); the UEs'
    # heartbeats still reach it, and their TTL (--heartbeat-timeout-ms) closes a connection gone silent
    Heartbeat(0, cfg.heartbeat_timeout_ms).apply(sock)
    # no ROUTER_HANDOVER: with CURVE and heartbeats, libzmq aborts when identities are taken over repeatedly; a UE
    # that redials uses a fresh identity, and its sessions follow their token (testbed/live/admission.py)
    stop = {"flag": False}
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.update(flag=True))
    try:
        with ExitStack() as stack:
            if cfg.auth:
                stack.callback(serve_curve(ctx, sock, cfg.auth).stop)
            watch = PeerWatch(sock)
            stack.callback(watch.close)
            if getattr(server.engine, "greedy", None) is None:  # an engine of its own (vLLM) computes them inline
                server.worker = ReferenceWorker(server.generate, server.references)
                stack.callback(server.worker.stop)
            sys.setswitchinterval(SWITCH_INTERVAL_S)  # the loop gets the GIL back from the worker within ~1 ms
            endpoint = _bind(sock, cfg.bind)
            if warning := open_bind_warning(endpoint, cfg.auth):
                print(warning, file=sys.stderr, flush=True)
            ready(f"READY {endpoint}", flush=True)
            if server.batcher is None:
                _loop(Direct(sock, server.caps), server, stop, watch)
            else:
                with Inbox(ctx, sock, server.busy, cfg.inbox_max_msgs, server.caps, int(cfg.inbox_peer_mb * 2**20),
                           int(cfg.inbox_total_mb * 2**20)) as inbox:
                    _loop(inbox, server, stop, watch)
    finally:
        sock.close(0)
        ctx.term()


def check_free(bind: str) -> None:
    """A ValueError naming --bind when its TCP port is taken on this host (port 0, any free one, always passes)."""
    host, _, port = bind.removeprefix("tcp://").rpartition(":")
    if port in ("0", "*"):
        return
    with socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as ZeroMQ: a TIME_WAIT port is free
        try:
            probe.bind((host.strip("[]").replace("*", "") or "0.0.0.0", int(port)))
        except OSError as e:
            raise ValueError(f"--bind {bind}: cannot bind ({e.strerror}); is another process listening there? "
                             "choose another port, or port 0 for a free one") from None


def _bind(sock: zmq.Socket, bind: str) -> str:
    if bind.endswith(":0"):
        bind = bind[:-2] + ":*"
    try:
        sock.bind(bind)
    except zmq.ZMQError as e:  # the port is taken, or the address is not this host's
        raise ValueError(f"--bind {bind}: cannot bind ({e.strerror}); is another process listening there? "
                         "choose another port, or port 0 for a free one") from None
    return sock.getsockopt(zmq.LAST_ENDPOINT).decode()


def _loop(source: Direct | Inbox, server: EdgeServer, stop: dict, watch: PeerWatch | None = None) -> None:
    """Serve until stopped: free the sessions of peers gone, handle what arrived, one batch per turn, and sweep idle
    sessions every second."""
    last_sweep = time.monotonic()
    while not stop["flag"]:
        wait_s = 0 if server.held else REFERENCE_POLL_S if server.worker and server.worker.busy else 0.1
        items = source.get(wait_s, 4 * server.cfg.max_batch)
        gone = watch.gone(items) if watch else []
        for peer in gone:
            if n := server.drop_peer(peer):
                log.info("peer %s disconnected: freed %d session(s)", peer.hex(), n)
            server.probes.level.pop(peer, None)
        if items or server.held:  # one batch per turn: what arrived during it joins the queue before the next pick
            for peer, reply in server.handle_many([(p, f, t) for t, p, f in items], one_batch=True):
                source.send([peer] + reply)
        for peer, reply in server.references_done():  # each as soon as it is ready
            source.send([peer] + reply)
        if time.monotonic() - last_sweep > 1.0:
            server.sweep()
            trim_heap()  # what peers gone left in freed buffers goes back to the OS
            last_sweep = time.monotonic()


def raise_fd_limit() -> int:
    """Raise this process's open-file limit to its hard limit (each connection holds one); returns the new one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None


def trim_heap() -> None:
    """glibc: return the free heap to the OS (``malloc_trim``); elsewhere nothing."""
    if _LIBC is not None and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)


def parse_args(argv: list[str] | None = None) -> ServeConfig:
    return config.parse(ServeConfig, argv, prog=PROG, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    rate_limit_warnings("testbed.serve", "testbed.auth", "testbed.auth.zap", "testbed.batch")
    cfg = parse_args(argv)
    log.info("config %s", asdict(cfg))
    try:
        with capturing(cfg.capture, iface_for(cfg.capture, cfg.capture_iface, cfg.bind)):
            serve(cfg)
    except ValueError as e:  # a bad --head, --target, --auth DIR or heartbeat setting
        print(f"{PROG}: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
