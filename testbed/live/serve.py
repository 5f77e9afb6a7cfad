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

import gc
import logging
import signal
import socket
import sys
import time
from collections import OrderedDict
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import zmq

import config
from protocols.edge_side import EdgeSession, ProtocolError
from protocols.handshake import Vocab, vocab_refusal
from protocols.wire import WIRE_VERSION, Limits, Message, MsgType, WireError, decode, encode, error_message, make
from testbed.common.heads import load_policy
from testbed.live.auth import open_bind_warning, serve_curve, user_id
from testbed.live.edgebatch import DraftBatcher
from testbed.live.inbox import MAX_QUEUE_MSGS, Direct, Inbox
from testbed.live.liveness import HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS, Heartbeat, PeerWatch
from testbed.live.sockbounds import HWM_MSGS, bound_socket
from wisv.serving.batchverify import BatchVerifier, EngineConfig, EngineView
from wisv.serving.estimator import EstimatorProfile
from wisv.tasks.evaluate import eos_id, greedy_reference
from wisv.serving.kvbudget import KVBudgetError, KVLedger, KVShape, refusal, session_tokens
from wisv.models.loader import DTYPE_CHOICES, builtin_paths, load_model, load_tokenizer, resolve_dtype, vocab_facts
from wisv.serving.scheduler import LOST_ORDER_CHOICES, SCHEDULER_CHOICES
from wisv.decoding.sessions import VerifySession
from wisv.serving.engine import ENGINE_CHOICES, VerifyEngine
from wisv.serving.vllm_engine import TargetFacts, VllmConfig, VllmVerifier
from wisv.serving.wdt import WDTPredictor
from wisv.pairs import apply_pair

log = logging.getLogger("testbed.serve")
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
        "min": 0})  # target-only outputs kept for REFERENCE requests (the oldest dropped first), prompts
    max_context_tokens: int | None = field(default=None, metadata={
        "min": 1})  # largest prompt + max_new_tokens asked (None: the target's context), tokens
    socket_hwm_msgs: int = field(default=HWM_MSGS, metadata={
        "min": 0})  # ZeroMQ send/receive high-water mark of the ROUTER, per peer, messages
    inbox_max_msgs: int = field(default=MAX_QUEUE_MSGS, metadata={
        "min": 1})  # batching: arrivals queued for the serving loop; beyond, ERROR busy, messages
    heartbeat_ivl_ms: int = field(default=HEARTBEAT_IVL_MS, metadata={
        "min": 0})  # ZMTP heartbeat PING interval of the ROUTER, ms (0: none)
    heartbeat_timeout_ms: int = field(default=HEARTBEAT_TIMEOUT_MS, metadata={
        "min": 0})  # a peer silent this long after a PING is dropped, sessions freed, ms
    auth: str | None = None  # key dir from testbed.keys: require CURVE, accept only DIR/clients/*.key (None: anyone)
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
        self.limits = Limits(vocab_size=int(target.config.vocab_size), max_draft_len=cfg.max_draft_len,
                             max_positions=cfg.max_draft_len)
        self.sessions: dict[tuple[bytes, str], EdgeSession] = {}
        self.peer_keys: dict[bytes, str | None] = {}  # peer -> the authenticated key (ZAP User-Id) it sends with
        self.owners: dict[tuple[bytes, str], str | None] = {}  # session -> the key that opened it
        self.engine, self.batcher = _engine(cfg, target, self.hidden_layer)
        self.kv_shape, self.kv = KVShape.of(target), KVLedger(cfg.memory_budget_mb)  # reservations (no engine)
        self.held: list = []  # validated DRAFTs waiting for the batcher (peer, EdgeSession)
        self.references: OrderedDict[tuple, list[int]] = OrderedDict()  # (prompt, budget) -> target-only output
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
            return [(item[0], self._guard(item[0], item[1], self._dispatch, t0=_arrival(item))) for item in items]
        replies = []
        for item in items:
            peer, frames = item[:2]
            out = self._guard(peer, frames, self._hold_drafts, t0=_arrival(item))
            (self.held if isinstance(out, EdgeSession) else replies).append((peer, out))
        self.held = [(p, s) for p, s in self.held if self.sessions.get((p, s.sid)) is s]  # closed meanwhile: drop
        while self.held:
            for peer, sess, block, dt, n in self._step():
                finish = lambda *_: self._suggest(sess, _end_draft(sess, block, dt, n))  # noqa: E731
                replies.append((peer, self._guard(peer, None, finish, sid=sess.sid)))
            if one_batch:
                break
        return replies

    def _suggest(self, sess: EdgeSession, reply: Message) -> Message:
        """The VERDICT with a suggested stop depth for the next block, when the batcher has a WDT predictor."""
        return _with_stop_depth(reply, self.batcher.stop_depth(sess) if self.batcher else None)

    def _guard(self, peer: bytes, frames: list | None, act, sid: str = "unknown", t0: float | None = None):
        """Run ``act(peer, msg, t0)`` on the decoded frames (t0: arrival, default now); errors become ERROR replies."""
        t0 = time.perf_counter() if t0 is None else t0
        try:
            msg = decode(frames, self.limits) if frames is not None else None
            sid = msg.session if msg is not None else sid
            out = act(peer, msg, t0)
            return out if isinstance(out, EdgeSession) else encode(out)
        except (WireError, ProtocolError, KVBudgetError) as e:
            return encode(error_message(sid, e.code, str(e)))
        except Exception:  # noqa: BLE001 - the server must keep serving other sessions
            log.exception("internal error handling a message from session %s", sid)
            self._drop(peer, sid)
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
        """The authenticated key each peer's connection uses, from its messages' ZAP User-Id (None: no CURVE)."""
        for item in items:
            self.peer_keys[item[0]] = user_id(item[1])

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
            payload = np.zeros(msg.header.get("reply_bytes", 0), np.uint8)
            return make(MsgType.PONG, msg.session, {"payload": payload}, seq=msg.header["seq"],
                        t_send=msg.header["t_send"])
        if msg.type == MsgType.OPEN:
            return self._open(peer, msg)
        if msg.type == MsgType.REFERENCE:
            return self._reference(msg)
        sess = self._session(peer, msg, t0)
        if msg.type == MsgType.DRAFT:
            return sess.on_draft(msg)
        if msg.type == MsgType.HIDDEN:
            return sess.on_hidden(msg)
        if msg.type == MsgType.CLOSE:
            self._drop(peer, msg.session)
            log.info("closed session %s", msg.session)
            return make(MsgType.CLOSED, msg.session)
        raise ProtocolError("bad_type", f"the edge does not accept {msg.type.name} messages")

    def _session(self, peer: bytes, msg: Message, t0: float) -> EdgeSession:
        sess = self.sessions.get((peer, msg.session))
        if sess is None:
            raise ProtocolError("unknown_session", f"no open session {msg.session!r} for this peer")
        if self.owners.get((peer, msg.session)) != self.peer_keys.get(peer):
            raise ProtocolError("forbidden", f"session {msg.session!r} was opened with another key")
        sess.last_active, sess.msg_t0 = time.monotonic(), t0
        return sess

    def _open(self, peer: bytes, msg: Message) -> Message:
        if len(self.sessions) >= self.cfg.max_sessions and (peer, msg.session) not in self.sessions:
            raise ProtocolError("busy", f"{len(self.sessions)} sessions open (max {self.cfg.max_sessions})")
        if msg.header["draft_len"] > self.cfg.max_draft_len:
            raise ProtocolError("too_large", f"draft_len {msg.header['draft_len']} > this edge's --max-draft-len "
                                             f"{self.cfg.max_draft_len}")
        self._check_budget(msg.header["max_new_tokens"], len(msg.tensors["prompt"]))
        self._check_vocab(msg.header)
        self._drop(peer, msg.session)
        prompt = [int(t) for t in msg.tensors["prompt"]]
        n = session_tokens(len(prompt), msg.header["max_new_tokens"], msg.header["draft_len"])
        self._admit_kv(n, f"session {msg.session!r} ({n} positions: prompt, max_new_tokens, draft_len)",
                       (peer, msg.session))
        try:
            verify = (EngineView(self.engine, f"{peer.hex()}/{msg.session}", prompt) if self.engine is not None
                      else VerifySession(self.target, prompt, self.hidden_layer))
            sess = EdgeSession(msg.session, verify, msg, self.policy, self.tau, self.eos)
        except Exception:
            self.kv.release((peer, msg.session))
            raise
        self.sessions[(peer, msg.session)] = sess
        self.owners[(peer, msg.session)] = self.peer_keys.get(peer)
        log.info("open session %s from peer %s (%s, K=%d)", msg.session, peer.hex(), sess.protocol_name, sess.draft_len)
        vocab_hash = {"vocab_hash": self.vocab.hash} if self.vocab.hash else {}
        return make(MsgType.OPEN_OK, msg.session, target_hidden=int(self.target.config.hidden_size),
                    vocab_size=int(self.target.config.vocab_size), hidden_layer=self.hidden_layer, edge=self.settings,
                    **vocab_hash)

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

    def _reference(self, msg: Message) -> Message:
        """The target-only greedy output of the prompt, within a session's limits; cached (it blocks the loop)."""
        n = msg.header["max_new_tokens"]
        self._check_budget(n, len(msg.tensors["prompt"]))
        self._check_vocab(msg.header)
        key = (tuple(int(t) for t in msg.tensors["prompt"]), n)
        cached = key in self.references
        if cached:
            self.references.move_to_end(key)
        else:
            self._admit_kv(len(key[0]) + n, f"REFERENCE of {len(key[0])} + {n} positions")
            greedy = getattr(self.engine, "greedy", None)  # an engine that runs the target without us (vLLM)
            self.references[key] = (greedy(list(key[0]), n, self.eos) if greedy is not None
                                    else greedy_reference(self.target, list(key[0]), n))
            while len(self.references) > self.cfg.reference_cache:
                self.references.popitem(last=False)
        tokens = np.asarray(self.references[key], np.int32)  # [n] new tokens
        return make(MsgType.REFERENCE_OK, msg.session, {"tokens": tokens}, cached=cached)

    def _drop(self, peer: bytes, sid: str) -> None:
        sess = self.sessions.pop((peer, sid), None)
        self.owners.pop((peer, sid), None)
        self.kv.release((peer, sid))
        if sess is not None:
            sess.verify.free()

    def drop_peer(self, peer: bytes) -> int:
        """Free every session (and KV cache) of a peer whose connection ended; return how many."""
        mine = [sid for p, sid in self.sessions if p == peer]
        for sid in mine:
            self._drop(peer, sid)
        self.peer_keys.pop(peer, None)
        return len(mine)

    def sweep(self, now: float | None = None) -> int:
        """Free sessions idle for longer than the timeout; return how many."""
        now = time.monotonic() if now is None else now
        stale = [k for k, s in self.sessions.items() if now - s.last_active > self.cfg.session_timeout_s]
        for peer, sid in stale:
            self._drop(peer, sid)
        return len(stale)


def edge_settings(cfg: ServeConfig, tau: float, head: str, hidden_layer: int) -> dict:
    """The settings an edge reports in OPEN_OK (a run records them in config.json)."""
    vllm = {f"vllm_{k}": v for k, v in asdict(cfg.vllm).items()} if cfg.engine == "vllm" else {}  # flat on the wire
    return {"target": cfg.target or "built-in", "head": head, "tau": float(tau), "hidden_layer": hidden_layer,
            "engine": cfg.engine, **vllm, "device": cfg.device, "dtype": cfg.dtype, "max_draft_len": cfg.max_draft_len, "max_session_tokens": cfg.max_session_tokens,
            "batch_verify": cfg.batch_verify, "scheduler": cfg.scheduler, "max_batch": cfg.max_batch,
            "kv_reuse": cfg.kv_reuse, "estimator": cfg.estimator, "wire_version": WIRE_VERSION}


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
    ctx = zmq.Context()
    sock = bound_socket(ctx.socket(zmq.ROUTER), server.limits, cfg.socket_hwm_msgs)
    sock.setsockopt(zmq.LINGER, 0)
    Heartbeat(cfg.heartbeat_ivl_ms, cfg.heartbeat_timeout_ms).apply(sock)
    sock.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a UE that reconnects (a retry) takes its identity over at once
    stop = {"flag": False}
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.update(flag=True))
    try:
        with ExitStack() as stack:
            if cfg.auth:
                stack.callback(serve_curve(ctx, sock, cfg.auth).stop)
            watch = PeerWatch(sock)
            stack.callback(watch.close)
            endpoint = _bind(sock, cfg.bind)
            if warning := open_bind_warning(endpoint, cfg.auth):
                print(warning, file=sys.stderr, flush=True)
            ready(f"READY {endpoint}", flush=True)
            if server.batcher is None:
                _loop(Direct(sock), server, stop, watch)
            else:
                with Inbox(ctx, sock, server.busy, cfg.inbox_max_msgs) as inbox:
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
        items = source.get(0 if server.held else 0.1, 4 * server.cfg.max_batch)
        for peer in watch.gone(items) if watch else ():
            if n := server.drop_peer(peer):
                log.info("peer %s disconnected: freed %d session(s)", peer.hex(), n)
        if items or server.held:  # one batch per turn: what arrived during it joins the queue before the next pick
            for peer, reply in server.handle_many([(p, f, t) for t, p, f in items], one_batch=True):
                source.send([peer] + reply)
        if time.monotonic() - last_sweep > 1.0:
            server.sweep()
            last_sweep = time.monotonic()


def parse_args(argv: list[str] | None = None) -> ServeConfig:
    return config.parse(ServeConfig, argv, prog=PROG, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cfg = parse_args(argv)
    log.info("config %s", asdict(cfg))
    try:
        serve(cfg)
    except ValueError as e:  # a bad --head, --target, --auth DIR or heartbeat setting
        print(f"{PROG}: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
