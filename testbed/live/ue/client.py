"""The UE's side of the socket: a DEALER shell that counts wire bytes and stamps times at the socket, a round's link
over it (``RoundLink``, what ``UESession.play_round`` runs over), and the exchanges a UE makes outside its rounds (RTT
handshake and rate probes, OPEN with its checks, REFERENCE).  Every exchange is retried within the retry window
(testbed/live/ue/retry.py): after a receive timeout the socket is replaced and the same message sent again; the edge
answers a retransmission as it answered the first."""
from __future__ import annotations

import dataclasses
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import zmq

from channel.measure import CSIEstimator
from protocols.accounting import wire_bytes
from protocols.handshake import REFUSALS, Vocab
from protocols.schema import OpenOk
from protocols.ue_side import REPLY_TO, EdgeError, HandshakeError, UESession, edge_error, is_current
from protocols.wire import Limits, Message, MsgType, decode, encode, make
from testbed.live.common.auth import HANDSHAKE_WAIT_S, secure_connect
from testbed.live.common.keepalive import Keepalive
from testbed.live.common.liveness import Heartbeat
from testbed.live.common.sockbounds import bound_socket
from testbed.live.ue.retry import RETRYABLE, Window

UNKNOWN_SESSION = "unknown_session"  # the edge's ERROR code for a session it does not hold (restarted, or freed)
IN_PROGRESS = "in_progress"  # the edge's ERROR code for a retransmitted DRAFT still being verified: keep waiting


class Client:
    """DEALER socket shell: send/receive Messages, counting the bytes they occupy on the link."""

    def __init__(self, ctx: zmq.Context, endpoint: str, name: str, limits: Limits, timeout_s: float,
                 auth: str | None = None, heartbeat: Heartbeat = Heartbeat(), retry_s: float = 60.0):
        self.ctx, self.endpoint, self.name, self.timeout_s = ctx, endpoint, name, timeout_s
        self.identity = ""  # this connection's socket identity: the name and a random tag, new on every reconnect
        self.auth, self.heartbeat = auth, heartbeat  # CURVE key dir (testbed.keys; None: none); ZMTP heartbeats
        self.retry_s = retry_s  # retry window of one exchange or round, s
        self.limits = limits
        self.t_sent = self.t_received = 0.0  # perf_counter at the socket of the last send / the last reply
        self.sock = self._connect()
        self.keepalive = (Keepalive(ctx, endpoint, f"{name}-ka", limits, heartbeat.ivl_ms / 1e3, auth)
                          if heartbeat.ivl_ms > 0 else None)  # keeps the open session alive while this one is idle

    def _connect(self, redial: bool = False) -> zmq.Socket:
        sock = bound_socket(self.ctx.socket(zmq.DEALER), self.limits)
        self.identity = peer_identity(self.name)  # the edge routes by it; sessions follow their token, not it
        sock.setsockopt(zmq.IDENTITY, self.identity.encode())
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, int(self.timeout_s * 1000))
        self.heartbeat.apply(sock)
        secure_connect(sock, self.endpoint, self.auth, min(self.timeout_s, HANDSHAKE_WAIT_S),  # refused: raises
                       hangup_ok=redial)  # a redial: an edge restarting behind the emulator hangs up mid-handshake
        return sock

    def reconnect(self) -> None:
        """Drop the socket and any late replies queued on it (after a timeout); dial again with a fresh identity (the
        edge does not hand an identity over to a new connection while the old one lingers)."""
        self.sock.close(0)
        self.sock = self._connect(redial=True)

    def send(self, msg: Message) -> int:
        """Encode and send; ``t_sent`` is stamped at the socket, after encoding (the codec is host work, not link)."""
        frames = encode(msg)
        self.t_sent = time.perf_counter()
        self.sock.send_multipart(frames, copy=False)
        return wire_bytes(frames)

    def reply_waiting(self) -> bool:
        """True when a reply is already queued on the socket."""
        return bool(self.sock.poll(0))

    def recv(self, session: str | None = None, round_: int | None = None,
             want: MsgType | None = None) -> tuple[Message, int]:
        """Next reply (of ``session``, of round ``round_`` and of type ``want`` or ERROR, for those given: stale replies
        of other sessions, rounds or requests are dropped)."""
        while True:
            try:
                frames = self.sock.recv_multipart(copy=False)
            except zmq.Again:
                raise TimeoutError(f"no reply within {self.timeout_s:g} s (--recv-timeout-s)") from None
            self.t_received = time.perf_counter()  # at the socket, before decoding
            msg = decode(frames, self.limits)
            if is_current(msg, session, round_, want):
                return msg, wire_bytes([f.buffer for f in frames])

    def exchange(self, msg: Message) -> tuple[Message, float]:
        """Send and wait for the reply, resending within the retry window; (reply, socket-to-socket seconds of the
        last attempt)."""
        window = Window(self.retry_s, f"{msg.type.name} of session {msg.session} to the edge at {self.endpoint}")
        while True:
            self.send(msg)
            try:
                reply, _ = self.recv(msg.session, want=REPLY_TO.get(msg.type))
            except TimeoutError as e:
                self.retry(window, str(e))
                continue
            if reply.type != MsgType.ERROR:
                return reply, self.t_received - self.t_sent
            if reply.header["code"] not in RETRYABLE:
                raise edge_error(reply)
            self.retry(window, str(edge_error(reply)))

    def retry(self, window: Window, why: str) -> None:
        """Wait for the window's next attempt (or raise RetryExhausted), then replace the socket; say so on stderr
        now and then (an unreachable edge is not silence)."""
        if window.note_due():
            left = max(0.0, window.window_s - (window.clock() - window.t0))
            print(f"waiting for {self.endpoint}: no answer yet ({why}); retrying for up to {left:.0f} s more "
                  "(--retry-s)", file=sys.stderr, flush=True)
        window.next_attempt(why)
        self.reconnect()

    def close(self) -> None:
        if self.keepalive is not None:
            self.keepalive.stop()
        self.sock.close(0)


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


class RoundLink:
    """One round of ``sess`` over the client, counted in ``io``: the round's messages go out, its replies come in
    (stale ones and IN_PROGRESS dropped).  The exchange happens exactly once: after a receive timeout (or a busy
    edge) the DRAFT is resent, which the edge answers from its cache; after an edge restart (ERROR
    ``unknown_session``) the session is re-OPENed with its committed prefix and the DRAFT resent; all within the
    retry window."""

    def __init__(self, client: Client, sess: UESession):
        self.client, self.sess, self.io = client, sess, RoundIO()
        self.draft: Message | None = None  # the round's DRAFT, once sent

    def send(self, msg: Message) -> None:
        """Send the DRAFT, or an answer to a reply (HIDDEN: the UE's work since that reply is not link time)."""
        c, io = self.client, self.io
        io.up += c.send(msg)
        io.exchanges += 1
        if self.draft is None:
            self.draft, io.t_first = msg, c.t_sent
        else:
            io.ue_mid_s += c.t_sent - io.t_last

    def expect(self, msg: Message) -> None:
        """A round whose request went out in an earlier round (a stream's next chunk): nothing is sent now; after a
        timeout, a busy edge or a resume, ``msg`` is what goes again."""
        self.draft, self.io.t_first = msg, time.perf_counter()

    def reply_waiting(self) -> bool:
        return self.client.reply_waiting()

    def replies(self) -> Iterator[Message]:
        """The round's replies in order, an edge ERROR that ends the round included."""
        c, io = self.client, self.io
        window = Window(c.retry_s, f"round {self.draft.header['round']} of session {self.sess.sid} with the edge at "
                                   f"{c.endpoint}")
        while True:
            try:
                reply, nbytes = c.recv(self.sess.sid, self.draft.header["round"])
            except TimeoutError as e:
                self._resend(window, str(e))
                continue
            io.down += nbytes
            io.t_last = c.t_received
            code = reply.header["code"] if reply.type == MsgType.ERROR else None
            if code == IN_PROGRESS:
                continue
            if code == UNKNOWN_SESSION:
                window.next_attempt(str(edge_error(reply)))  # bounded: an edge that keeps losing it ends the run
                open_session(c, self.sess)  # the committed prefix, the budget left, this round first
                self.draft.header.update(self.sess.token)  # the resumed session's new token
                io.resumed += 1
                self._resend()
            elif code in RETRYABLE:
                self._resend(window, str(edge_error(reply)))
            else:
                yield reply

    def _resend(self, window: Window | None = None, why: str = "") -> None:
        """Send the DRAFT again (after waiting for the window's next attempt, when given)."""
        if window is not None:
            self.client.retry(window, why)
            self.io.retries += 1
        self.io.up += self.client.send(self.draft)
        self.io.exchanges += 1


def peer_identity(name: str) -> str:
    """A socket identity unique on a shared edge (two hosts' UEs may both be ``ue0``): the name and a random tag.
    The identity only routes replies: a session is found by its token (and, under --auth, the key)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def handshake(client: Client, est: CSIEstimator, sid: str, probe: bool, seq: int) -> None:
    """RTT pings before a request, then (``probe``) timed uplink and downlink probes sized by the estimator; the
    first handshake sends a few of each (CSIEstimator.probes_wanted)."""
    for _ in range(est.probes_wanted()):
        est.add_rtt(client.exchange(make(MsgType.PING, sid, None, seq=seq, t_send=time.time()))[1])
    if not probe:
        return
    for _ in range(est.probes_wanted("up")):
        n = est.probe_bytes("up")
        up = make(MsgType.PING, sid, {"payload": np.zeros(n, np.uint8)}, seq=seq, t_send=time.time())
        est.add_probe("up", n, client.exchange(up)[1])
    for _ in range(est.probes_wanted("down")):
        n = est.probe_bytes("down")
        down = make(MsgType.PING, sid, None, seq=seq, t_send=time.time(), reply_bytes=n)
        est.add_probe("down", n, client.exchange(down)[1])


def open_session(client: Client, sess: UESession) -> OpenOk:
    """OPEN and its OPEN_OK, checked on both sides; a handshake refusal raises HandshakeError (the run ends)."""
    msg = sess.open_message()
    if client.keepalive is not None:
        msg.header["keepalive_ms"] = client.heartbeat.ivl_ms
    ok = OpenOk.of(_refusal_is_fatal(client.exchange, msg)[0].header)
    sess.check_open_ok(ok)
    if client.keepalive is not None and sess.token:
        client.keepalive.hold(sess.sid, sess.token)
    client.limits = dataclasses.replace(client.limits, vocab_size=max(client.limits.vocab_size, ok.vocab_size))
    return ok


def close_session(client: Client, sess: UESession) -> None:
    """CLOSE and its CLOSED; an edge that no longer knows the session (restarted meanwhile) has nothing to close."""
    if client.keepalive is not None:
        client.keepalive.release(sess.sid)
    try:
        client.exchange(sess.close_message())
    except EdgeError as e:
        if e.code != UNKNOWN_SESSION:
            raise


def _refusal_is_fatal(exchange: Callable, msg: Message):
    """``exchange(msg)``, with a handshake refusal (version, vocabulary, sizes) raised as HandshakeError."""
    try:
        return exchange(msg)
    except EdgeError as e:
        if e.code in REFUSALS:
            raise HandshakeError(f"the edge refused {msg.type.name}: {e}") from None
        raise


def fetch_references(client: Client, prompts: list[dict], max_new_tokens: int, sid: str,
                     vocab: Vocab | None) -> dict[str, list[int]]:
    """Target-only greedy outputs of the prompts, computed (and cached) by the edge: what lossless protocols give.
    ``vocab``: the prompts' tokenizer, declared as at OPEN (the edge refuses another one before any work)."""
    refs, declared = {}, {} if vocab is None else vocab.header()
    for p in prompts:
        msg = make(MsgType.REFERENCE, sid, {"prompt": np.asarray(p["prompt_ids"], np.int32)},
                   max_new_tokens=max_new_tokens, **declared)
        refs[str(p["prompt_id"])] = [int(t) for t in _refusal_is_fatal(client.exchange, msg)[0].tensors["tokens"]]
    return refs
