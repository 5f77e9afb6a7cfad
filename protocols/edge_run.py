"""A round `auto` hands to the edge, run as a stream: the target alone decodes a step per turn and sends its tokens
in parts (the edge's side; the UE's is protocols/ue_handover.py).

A speculative session's GENERATE with ``tokens`` n (the UE's auto, when speculation does not pay) starts a run: the
edge's target decodes greedily, one step per turn of the edge's streams (protocols/stream.py ``decode_turn``: batched
with the server-only streams and the other runs on a batching edge, so that no session waits for a long run), up to
n tokens (fewer at the budget or EOS); with the edge's drafter, each step verifies its draft (several tokens a pass).
The tokens go in parts by GENERATE's chunk rule (no rule: one part, the whole run).  A UE that drafts by prompt lookup
may name its rule and a streak (``lookup_stop``): the run then ends early, its part going out flagged ``stopped``,
after that many tokens in a row that the lookup named first (wisv/decoding/ngram.py ``agree_streak``, the same rule on
the same tokens as the UE's): the output copies again, where the UE's lookup drafts whole spans a pass, so the UE
speculates again without waiting for the run's end.  Each part is a CHUNK and a round
of its own (rounds r, r + 1, ...), so that no reply timeout bounds a run, only a part: each arrives within it.  The
UE knows the run's end from n (its parts' tokens add up to n, or one says ``done``).  Exactly once: a GENERATE
naming a part already sent resends the run's parts from it (the run goes on); one naming the part being decoded
changes nothing (it follows).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from protocols.chunks import ChunkRule, chunk_due, chunk_message
from protocols.edge_draft import EdgeDrafter, greedy_step
from protocols.errors import ProtocolError
from protocols.wire import Message
from wisv.decoding.ngram import NgramConfig, agree_streak
from wisv.decoding.sessions import Block, VerifySession
from wisv.serving.engine import VerifyRequest


@dataclass
class Run:
    """A handed-over round under way on the edge."""

    first_round: int  # the round of the run's first part
    left: int  # tokens the run may still decode
    rule: ChunkRule  # when a part ends (besides the run's end)
    t_mark: float  # perf_counter when the previous part went out (or the GENERATE came in), s
    sent: list[Message] = field(default_factory=list)  # the parts sent, from first_round on
    resend: list[Message] = field(default_factory=list)  # parts asked for again, sent before the next step
    part: list[int] = field(default_factory=list)  # the tokens of the part being filled
    draft: list[int] = field(default_factory=list)  # the edge's draft for the step under way
    t_decode_s: float = 0.0  # the part's passes, s
    batch: int = 1  # most sessions decoded in one of those passes
    drafted: int = 0  # the part's tokens drafted by the edge
    accepted: int = 0  # of them, committed
    lookup: NgramConfig | None = None  # the UE's prompt-lookup rule the run stops on (None: it runs to its end)
    stop_streak: int = 0  # it stops after this many tokens in a row the lookup named first
    streak: int = 0  # such tokens in a row so far
    stopped: bool = False  # it stopped so, before its tokens


def run_rule(header: dict, tokens: int) -> ChunkRule:
    """A run's part rule from its GENERATE: every ``every_tokens`` (none: the run's ``tokens``, one part) or
    ``every_ms``."""
    return ChunkRule(header.get("every_tokens") or tokens, header.get("every_ms"))


def lookup_stop(header: dict) -> tuple[NgramConfig | None, int]:
    """A run's lookup stop from its GENERATE (protocols/msgchecks.py checked it comes whole): the UE's rule and the
    streak that stops the run; (None, 0) without one."""
    if "stop_streak" not in header:
        return None, 0
    return NgramConfig(header["prompt_lookup_min"], header["prompt_lookup_max"]), header["stop_streak"]


def part_due(rule: ChunkRule, tokens: int, elapsed_s: float, left: int, ended: bool) -> bool:
    """Whether the part being filled (``tokens`` tokens, ``elapsed_s`` after the previous part) goes out now: by the
    rule, or at the run's end (``left`` 0 tokens, or the session ``ended``: budget or EOS) (pure)."""
    return tokens > 0 and (left <= 0 or ended or chunk_due(rule, tokens, elapsed_s))


class RunsAlone:
    """The edge side of auto's handed-over rounds, mixed into EdgeSession: GENERATE starts a ``Run``, and the session
    offers the stream interface ``decode_turn`` steps (protocols/stream.py ``Streaming``)."""

    sid: str
    protocol_name: str
    token: str
    verify: VerifySession
    drafter: EdgeDrafter | None
    key: str
    context: list[int]
    eos: int | None
    max_new: int
    generated: int
    done: bool
    next_round: int
    pending: object | None
    incoming: object | None
    last_active: float
    msg_t0: float
    last_committed: list[int]
    run: Run | None = None  # the handed-over round under way (or the last one), None before any

    def on_generate(self, msg: Message) -> None:
        """A round handed to the edge (GENERATE with ``tokens``): start its run; a GENERATE naming a part sent
        resends from it, one naming the part being decoded changes nothing.  The parts follow from the stream turns.
        A GENERATE asking for a stream (no ``tokens``) is refused: this session's UE drafts."""
        n, got, run = msg.header.get("tokens"), msg.header["round"], self.run
        if n is None:
            raise ProtocolError("bad_type", f"GENERATE without tokens in a {self.protocol_name} session: its UE "
                                            "drafts (DRAFT), or hands one round over with a token budget")
        if run is not None and run.first_round <= got < self.next_round:
            run.resend = run.sent[got - run.first_round:]
            return
        if run is not None and run.left > 0 and got == self.next_round:
            return  # the part being decoded: it follows
        if got != self.next_round:
            raise ProtocolError("bad_round", f"GENERATE for round {got}: expected round {self.next_round}")
        if self.done:
            raise ProtocolError("session_done", "GENERATE after the session finished")
        if self.pending is not None or self.incoming is not None:
            raise ProtocolError("bad_state", "GENERATE while a drafted round is in flight")
        left = min(n, self.max_new - self.generated)
        self.run = Run(got, left, run_rule(msg.header, left), self.msg_t0)
        self.run.lookup, self.run.stop_streak = lookup_stop(msg.header)

    @property
    def streaming(self) -> bool:
        """A handed-over round is being decoded."""
        return self.run is not None and self.run.left > 0 and not self.done

    @property
    def active(self) -> bool:
        """It has parts to send: resent ones, or new ones to decode."""
        return self.streaming or (self.run is not None and bool(self.run.resend))

    def take_resends(self) -> list[Message]:
        if self.run is None:
            return []
        out, self.run.resend = self.run.resend, []
        return out

    def next_draft(self) -> list[int]:
        """The edge's draft for the run's next step, kept for ``take`` (none without a drafter; never more than the
        run has room for beside the target's token)."""
        r = self.run
        r.draft = self.drafter.propose(self.key, self.context + r.part, r.left - 1) if self.drafter is not None else []
        return list(r.draft)

    def request(self) -> VerifyRequest:
        """The run's next step as the engine's request: the edge's draft, K + 1 positions scored."""
        return VerifyRequest(self.verify.sid, self.next_draft())

    def take(self, block: Block, t_pass_s: float, batch: int = 1) -> Message | None:
        """Commit the step's accepted draft and the target's token after it (greedy); the part's CHUNK when due."""
        r = self.run
        committed, accepted = greedy_step(self.verify, r.draft, block, r.left, self.eos)
        if self.drafter is not None:
            self.drafter.commit(self.key, committed)
        if r.lookup is not None:
            r.streak = agree_streak(self.context + r.part, committed, r.lookup, r.streak)
        r.part, r.left = r.part + committed, r.left - len(committed)
        if r.lookup is not None and r.left > 0 and r.streak >= r.stop_streak:
            r.stopped, r.left = True, 0
        r.drafted, r.accepted = r.drafted + len(r.draft), r.accepted + accepted
        r.t_decode_s, r.batch = r.t_decode_s + t_pass_s, max(r.batch, batch)
        self.last_active, now = time.monotonic(), time.perf_counter()
        ended = self.generated + len(r.part) >= self.max_new or (self.eos is not None and self.eos in committed)
        if not part_due(r.rule, len(r.part), now - r.t_mark, r.left, ended):
            return None
        self._count(r.part, indexed=True)
        drafts = (r.drafted, r.accepted) if self.drafter is not None else None
        msg = chunk_message(self.sid, self.last_committed, self.next_round, r.t_decode_s, now - r.t_mark, r.batch,
                            self.done, drafts, r.stopped)
        r.sent.append(msg)
        self.next_round += 1
        r.part, r.t_decode_s, r.batch, r.t_mark, r.drafted, r.accepted = [], 0.0, 1, now, 0, 0
        r.left = 0 if self.done else r.left
        return msg

    def stop(self) -> None:
        """End the run after a failed step (the UE gets the error).  Tokens decoded but not sent end the session
        (``done``: a GENERATE after it is refused, so that the UE resumes with what it committed)."""
        r = self.run
        if r is not None:
            self.done = self.done or bool(r.part)
            r.left, r.resend, r.part = 0, [], []
