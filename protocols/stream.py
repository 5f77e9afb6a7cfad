"""Generation without speculation: the chunk rule, a chunk's state, and the edge's side of server-only.

Server-only (a description that ``generates="target"``, wisv/timing/protodesc.py): after OPEN the UE sends one
GENERATE naming the first chunk it wants and how to chunk; the edge's target then decodes greedily alone, one token
per pass with its KV cache kept, and pushes the tokens in CHUNKs without waiting for another request.  A chunk ends
by ``ChunkRule`` (every N tokens, or once M ms passed since the previous chunk; by default every token).  Each chunk
is a round of the UE's records.  With ``--edge-draft`` (protocols/edge_draft.py) each pass also verifies the edge's
own draft, committing its accepted prefix and the target's argmax after it (the greedy rule,
wisv/decoding/acceptance.py: still the target's greedy output); a CHUNK then says how many tokens the edge drafted
and how many of them it committed (a chunk of several passes sums them, and may hold more tokens than its rule's
count).  Exactly once: chunks carry their index; a GENERATE naming chunk r (the UE timed out,
or reconnected) makes the edge send its chunks from r again and go on; after the edge lost the session the UE
re-OPENs with its committed prefix and asks from its next chunk, as every protocol resumes.  On-device
(``generates="drafter"``) chunks its drafter's output by the same rule, with no edge (protocols/ue_stream.py).
"""
from __future__ import annotations

import time
import typing
from dataclasses import dataclass

from protocols.chunks import ChunkRule, chunk_due, chunk_message
from protocols.edge_draft import EdgeDrafter, greedy_step
from protocols.edge_side import EdgeSession
from protocols.errors import ProtocolError
from protocols.registry import get_protocol
from protocols.wire import Message
from wisv.decoding.sessions import Block, VerifySession
from wisv.decoding.speculative import MismatchPolicy
from wisv.serving.engine import VerifyEngine, VerifyRequest


@dataclass
class ChunkState:
    """One chunk as the UE got it: a round of a protocol that generates alone (server-only, on-device)."""

    index: int  # the chunk's index in the prompt's stream (its round)
    protocol: str  # the protocol's name
    tokens: list[int]  # the chunk's tokens, as committed
    t_gen_s: float | None = None  # on-device: the drafter's time generating them, s
    t_decode_s: float | None = None  # server-only: the target's passes that decoded them, s
    t_edge_s: float | None = None  # server-only: edge time since the previous chunk went out, s
    batch: int | None = None  # server-only: most sessions decoded in one of those passes
    drafted: int = 0  # server-only: tokens the edge drafted for those passes (--edge-draft)
    accepted: int = 0  # server-only: of them, tokens committed


class EdgeStream:
    """One server-only session on the edge: the target alone continues the committed prefix greedily, one token per
    pass (the KV cache kept across passes and chunks), and sends the tokens in chunks once a GENERATE started it."""

    def __init__(self, sid: str, verify: VerifySession, open_msg: Message, eos_token_id: int | None,
                 drafter: EdgeDrafter | None = None):
        h = self.open_header = open_msg.header
        self.drafter, self.key = drafter, f"{sid}@{id(self):x}"  # the edge's drafts (None: none), its key there
        self.context = [int(t) for t in open_msg.tensors["prompt"]]  # the committed prefix: prompt, then output
        self.draft: list[int] = []  # the edge's draft of the step under way
        self.drafted = self.accepted = 0  # the chunk's drafted tokens and, of them, those committed
        if drafter is not None:
            drafter.open(self.key, self.context)
        self.sid, self.verify, self.eos = sid, verify, eos_token_id
        self.protocol_name, self.draft_len, self.max_new = h["protocol"], h["draft_len"], h["max_new_tokens"]
        self.first_round = self.next_round = h.get("round", 0)  # the stream's first chunk (resumed: past 0)
        self.sent: list[Message] = []  # the CHUNKs sent, from first_round on: a GENERATE naming one resends it
        self.resend: list[Message] = []  # chunks asked for again, sent before the next decode
        self.rule = ChunkRule()
        self.streaming = False  # a GENERATE started the stream and it has not ended
        self.chunk: list[int] = []  # the tokens of the chunk being filled
        self.t_decode_s, self.batch = 0.0, 1  # its passes' time, s, and their largest batch
        self.t_mark = time.perf_counter()  # the previous chunk went out (or the GENERATE came in)
        self.generated, self.done, self.rounds = 0, False, 0
        self.last_committed: list[int] = []  # the last chunk's tokens (the edge's journal records them)
        self.token, self.sibling, self.slo_tok_s = "", False, None  # the server sets token (and sibling)
        self.last_active, self.msg_t0 = time.monotonic(), time.perf_counter()

    def open_ok_fields(self) -> dict:
        return {}

    @property
    def active(self) -> bool:
        """It has chunks to send: resent ones, or new ones to decode."""
        return self.streaming or bool(self.resend)

    def on_generate(self, msg: Message) -> None:
        """Start the stream from the chunk GENERATE names (chunks already sent go again), chunked by its rule."""
        r = msg.header["round"]
        if not self.first_round <= r <= self.next_round:
            raise ProtocolError("bad_round", f"GENERATE from chunk {r}: this stream holds chunks "
                                             f"{self.first_round}..{self.next_round - 1} and makes {self.next_round}")
        if self.done and r == self.next_round:
            raise ProtocolError("session_done", "GENERATE after the stream ended")
        self.rule = ChunkRule.of(msg.header)
        self.resend = self.sent[r - self.first_round:]
        if not self.streaming and not self.done:
            self.streaming, self.t_mark = True, self.msg_t0

    def take_resends(self) -> list[Message]:
        out, self.resend = self.resend, []
        return out

    def next_draft(self) -> list[int]:
        """The edge's draft for the next decode step, kept for ``take`` (none without a drafter; never more than the
        budget has room for beside the target's token)."""
        room = self.max_new - self.generated - 1
        self.draft = self.drafter.propose(self.key, self.context, room) if self.drafter is not None else []
        return list(self.draft)

    def request(self) -> VerifyRequest:
        """The next decode step as the engine's request: the edge's draft, K + 1 positions scored."""
        return VerifyRequest(self.verify.sid, self.next_draft())

    def take(self, block: Block, t_pass_s: float, batch: int = 1) -> Message | None:
        """Commit the step's accepted draft and the target's argmax after it (greedy); the CHUNK when one is due (by
        the rule, or at the end)."""
        committed, accepted = greedy_step(self.verify, self.draft, block, self.max_new - self.generated, self.eos)
        self.chunk += committed
        self.context += committed
        self.generated += len(committed)
        self.drafted, self.accepted = self.drafted + len(self.draft), self.accepted + accepted
        self.t_decode_s, self.batch = self.t_decode_s + t_pass_s, max(self.batch, batch)
        self.done = self.generated >= self.max_new or (self.eos is not None and self.eos in committed)
        if self.drafter is not None:
            self.drafter.commit(self.key, committed)
            if self.done:
                self.drafter.close(self.key, ended=True)
        self.last_active, now = time.monotonic(), time.perf_counter()
        if not self.done and not chunk_due(self.rule, len(self.chunk), now - self.t_mark):
            return None
        drafts = (self.drafted, self.accepted) if self.drafter is not None else None
        msg = chunk_message(self.sid, self.chunk, self.next_round, self.t_decode_s, now - self.t_mark, self.batch,
                            self.done, drafts)
        self.sent.append(msg)
        self.next_round, self.rounds, self.last_committed = self.next_round + 1, self.rounds + 1, self.chunk
        self.chunk, self.t_decode_s, self.batch, self.t_mark = [], 0.0, 1, now
        self.drafted = self.accepted = 0
        self.streaming = not self.done
        return msg

    def stop(self) -> None:
        """End the stream after a failed step (the UE gets the error, and resumes or fails)."""
        self.streaming, self.resend = False, []

    def release(self) -> None:
        """The edge dropped the session: its sequence leaves the drafter's index (a finished one stays there)."""
        if self.drafter is not None:
            self.drafter.close(self.key, ended=self.done)

    def _refuse(self, msg: Message) -> Message:
        raise ProtocolError("bad_type", f"{msg.type.name} in a {self.protocol_name} session: the target generates "
                                        "alone (GENERATE)")

    on_draft = accept_draft = on_hidden = _refuse


class Streaming(typing.Protocol):
    """What a stream turn steps: a server-only ``EdgeStream``, or a speculative session's handed-over round
    (``EdgeSession``, protocols/edge_run.py)."""

    verify: VerifySession  # the target's session (``verify.sid`` names it to a batching engine)
    token: str  # the edge's token for the session

    @property
    def streaming(self) -> bool: ...  # tokens to decode

    @property
    def active(self) -> bool: ...  # chunks to send: resent ones, or new ones to decode

    def take_resends(self) -> list[Message]: ...  # the chunks asked for again
    def next_draft(self) -> list[int]: ...  # the next step's draft (kept for take)
    def request(self) -> VerifyRequest: ...  # the next step as a batching engine's request
    def take(self, block: Block, t_pass_s: float, batch: int = 1) -> Message | None: ...  # the step's chunk, if due
    def stop(self) -> None: ...  # end after a failed step


def decode_turn(streams: list[Streaming], engine: VerifyEngine | None,
                max_batch: int) -> list[tuple[Streaming, Message | Exception]]:
    """One turn of the edge's streams (server-only's, and auto's handed-over rounds): the chunks asked for again, then
    one decode step of every streaming session,
    in passes of up to ``max_batch`` sessions on a batching ``engine`` (else each session's pass alone); the chunks
    due, or a session's error (its stream stops)."""
    out: list[tuple[EdgeStream, Message | Exception]] = [(s, m) for s in streams for m in s.take_resends()]
    live = [s for s in streams if s.streaming]
    size = max_batch if engine is not None else 1
    for group in (live[i:i + size] for i in range(0, len(live), size)):
        t0 = time.perf_counter()
        try:
            got = engine.verify([s.request() for s in group]) if engine is not None else None
            blocks = [got[s.verify.sid] for s in group] if got is not None else \
                [group[0].verify.verify(group[0].next_draft())]
        except Exception as e:  # noqa: BLE001 - each session of the pass gets it (the server's guard logs it)
            blocks = [e] * len(group)
        dt = time.perf_counter() - t0
        for s, block in zip(group, blocks):
            out += [(s, m) for m in [_take(s, block, dt, len(group))] if m is not None]
    return out


def _take(s: Streaming, block: Block | Exception, dt: float, batch: int) -> Message | Exception | None:
    """A session's step from its block, or its error (the stream stops)."""
    try:
        if isinstance(block, Exception):
            raise block
        return s.take(block, dt, batch)
    except Exception as e:  # noqa: BLE001 - handed to the server's guard, which logs it
        s.stop()
        return e


def edge_session(sid: str, verify: VerifySession, msg: Message, policy: MismatchPolicy, tau: float,
                 eos_token_id: int | None, drafter: EdgeDrafter | None = None) -> EdgeSession | EdgeStream:
    """The edge's session for an OPEN, by what its protocol's description says generates: a speculative session, or
    the target's stream (either with the edge's ``drafter``, if any); a protocol generating on the UE opens none."""
    desc = get_protocol(msg.header["protocol"]).desc
    if not desc.edge_rounds:
        raise ProtocolError("unsupported", f"{desc.name} generates on the UE: it opens no session with the edge")
    if desc.speculative:
        return EdgeSession(sid, verify, msg, policy, tau, eos_token_id, drafter)
    return EdgeStream(sid, verify, msg, eos_token_id, drafter)
