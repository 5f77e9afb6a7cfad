"""Edge side of a session as a state machine over messages: DRAFT -> (HIDDEN_REQ -> HIDDEN ->) VERDICT.

The edge verifies a block in one target pass (KV cache kept across rounds), applies the
protocol's acceptance rule, commits, and reports its compute time so the UE can separate
communication from computation.  Rounds are exactly-once: a DRAFT must carry the session's next round; a
retransmitted DRAFT (or HIDDEN) of the round last answered gets that answer again, from a cache, without verifying
or committing again; any other round is refused with ERROR ``bad_round`` and changes nothing.  Where a chain and a
tree differ (the DRAFT's tensors, the verification pass, the acceptance, the commit), the protocol's round class
decides (protocols/rounds.py, protocols/tree.py).  With the edge's drafter (``--edge-draft``, protocols/edge_draft.py)
the session's prompt and committed output join its suffix index as they grow, and a round `auto` hands over
(GENERATE) verifies the edge's own drafts, several tokens a pass.  A handed-over round runs as a stream, a decode step
per turn of the edge's streams, sent in parts (protocols/edge_run.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from channel.csi import CSI
from protocols.edge_draft import EdgeDrafter, extend_verdict
from protocols.edge_run import RunsAlone
from protocols.errors import ProtocolError
from protocols.registry import ROUND_PROTOCOLS, WISV_PROTOCOLS, Protocol, get_protocol
from protocols.wire import Message, MsgType, make
from wisv.decoding.acceptance import Verdict, greedy_accept_ids, speculative_sampling_from_logits, wisv_accept
from wisv.decoding.sessions import Block, VerifySession
from wisv.decoding.speculative import MismatchPolicy, truncate_output
from wisv.head.features import edge_features
from wisv.serving.engine import VerifyRequest


@dataclass
class _Pending:
    """A verified block waiting for its decision (SH: for the requested hidden states)."""

    round: int
    tokens: list[int]
    tensors: dict[str, np.ndarray]  # the DRAFT's tensors (a tree's parents)
    block: Block
    mismatches: list[int]
    t_verify_s: float
    protocol: Protocol
    csi: CSI | None
    batch: int = 1  # requests verified in the same target pass
    extension: list[int] = field(default_factory=list)  # the edge's tokens after the draft, verified with it


def round_action(got: int, expected: int, answered: int | None) -> str:
    """What a DRAFT for round ``got`` is: "replay" (a retransmission of round ``answered``, the one last answered) or
    "new" (the ``expected`` next round); any other round raises ProtocolError ``bad_round``."""
    if answered is not None and got == answered:
        return "replay"
    if got == expected:
        return "new"
    again = "" if answered is None else f", or round {answered} again"
    raise ProtocolError("bad_round", f"DRAFT for round {got}: expected round {expected}{again}")


class EdgeSession(RunsAlone):
    """One UE session on the edge: target KV state, protocol, token budget."""

    def __init__(self, sid: str, verify: VerifySession, open_msg: Message, policy: MismatchPolicy, tau: float,
                 eos_token_id: int | None, drafter: EdgeDrafter | None = None):
        h = self.open_header = open_msg.header
        self.drafter, self.key = drafter, f"{sid}@{id(self):x}"  # the edge's drafts (None: none), its key there
        self.context = [int(t) for t in open_msg.tensors["prompt"]]  # the committed prefix: prompt, then output
        self.sid, self.verify, self.policy, self.tau, self.eos = sid, verify, policy, tau, eos_token_id
        self.protocol_name = h["protocol"]
        proto = get_protocol(self.protocol_name)  # checks the name
        self.shape = proto.rounds()  # where chain and tree differ
        refusal = self.shape.refusal(verify, proto.desc.engine)
        if refusal:
            raise ProtocolError("unsupported", refusal)
        self.draft_len, self.max_new = h["draft_len"], h["max_new_tokens"]
        self.drafter_hidden = h.get("drafter_hidden")
        _check_head_width(policy, self.protocol_name, self.drafter_hidden)
        self.temperature = h.get("temperature", 1.0)
        if not 0 < self.temperature < float("inf"):
            raise ProtocolError("bad_field", f"OPEN temperature must be finite and > 0, got {self.temperature}")
        self.gen = torch.Generator().manual_seed(h.get("seed", 0))
        self.generated, self.done, self.pending = 0, False, None
        self.last_committed: list[int] = []  # the tokens the last verified round committed
        self.incoming: tuple[Message, Protocol, list[int]] | None = None  # a DRAFT waiting for its block
        self.extension: list[int] = []  # the edge's own tokens after it (--edge-draft), verified in the same pass
        self.rounds = 0  # finished rounds (the scheduler's expected tokens per round = generated / rounds)
        self.next_round = h.get("round", 0)  # the round a new DRAFT must carry (a resumed session starts past 0)
        self.answered: tuple[int, Message] | None = None  # (round, its last reply: HIDDEN_REQ or VERDICT), resent
        self.slo_tok_s = _slo_of(h.get("meta"))  # the UE's SLO class, token/s (None: best effort)
        self.last_active = time.monotonic()
        self.msg_t0 = time.perf_counter()  # set by the server when a message of this session arrives
        self.round_edge_s = 0.0  # edge handling time of the round so far (SH: the DRAFT part)
        self.token = ""  # the edge's token for this session (its server sets it; messages carry it)
        self.sibling = False  # verify the target's own token beside each mismatch (edge sib_* features; server sets it)
        self.feature_rows = feature_grant(h.get("features", 0), verify)  # target-feature rows per VERDICT (0: none)
        if drafter is not None:
            drafter.open(self.key, self.context)

    def open_ok_fields(self) -> dict:
        """What OPEN_OK adds for this session: the target-feature grant, only to a UE that asked (else nothing, so a
        UE that does not ask gets the OPEN_OK it always got)."""
        return {"features": self.feature_rows} if "features" in self.open_header else {}

    def on_draft(self, msg: Message) -> Message:
        """Verify a block alone; reply HIDDEN_REQ (SH with mismatches) or VERDICT (a retransmission: the cached one)."""
        cached = self.accept_draft(msg)
        if cached is not None:
            return cached
        tokens = self.draft_tokens
        t0 = time.perf_counter()
        try:
            block = self.shape.verify(self.verify, tokens, self.incoming[0].tensors)
        except Exception:
            self.abort_draft()
            raise
        return self.end_draft(block, time.perf_counter() - t0)

    def accept_draft(self, msg: Message) -> Message | None:
        """The cached reply to a retransmitted DRAFT; for a new round, None once begin_draft has kept it."""
        got = msg.header["round"]
        if self.incoming is not None and self.incoming[0].header["round"] == got:
            raise ProtocolError("in_progress", f"round {got} is being verified; its reply follows")
        if round_action(got, self.next_round, None if self.answered is None else self.answered[0]) == "replay":
            return self.answered[1]
        self.begin_draft(msg)
        return None

    def begin_draft(self, msg: Message) -> list[int]:
        """Validate a DRAFT of the next round against the session's state and keep it until its block is verified;
        its tokens."""
        round_action(msg.header["round"], self.next_round, None)  # bad_round unless the next round
        if self.done:
            raise ProtocolError("session_done", "DRAFT after the session finished")
        if self.pending is not None:
            raise ProtocolError("bad_state", f"DRAFT while round {self.pending.round} waits for HIDDEN")
        if self.incoming is not None:
            raise ProtocolError("bad_state", "DRAFT while the session's previous DRAFT waits for verification")
        if self.streaming:
            raise ProtocolError("bad_state", f"DRAFT while the edge generates the round handed to it "
                                             f"(round {self.run.first_round} on)")
        proto = self._round_protocol(msg.header.get("protocol"))
        tokens = [int(t) for t in msg.tensors["tokens"]]
        self._check_draft(proto, msg, len(tokens))
        self.incoming, self.extension = (msg, proto, tokens), self._extension(proto, tokens)
        return tokens

    def _extension(self, proto: Protocol, tokens: list[int]) -> list[int]:
        """The edge drafter's continuation of a greedy chain DRAFT (after the committed prefix and the draft; at most
        the session's K, within the budget with the target's token; none past EOS)."""
        if self.drafter is None or proto.rule != "greedy" or proto.desc.tree or self.eos in tokens:
            return []
        room = min(self.draft_len, self.max_new - self.generated - len(tokens) - 1)
        return self.drafter.propose(self.key, self.context + tokens, room)

    @property
    def draft_tokens(self) -> list[int]:
        """The kept DRAFT's tokens and the edge's extension after them (between begin_draft and end_draft): what the
        target verifies."""
        return self.incoming[2] + self.extension

    def verify_request(self) -> VerifyRequest:
        """The kept DRAFT as the engine's request, by the protocol's round class (a tree carries its parents): what a
        batching edge hands its engine."""
        return self.shape.request(self.verify.sid, self.draft_tokens, self.incoming[0].tensors)

    def abort_draft(self) -> None:
        """Forget the kept DRAFT (its verification failed): the session can send its DRAFT again."""
        self.incoming, self.extension = None, []

    def end_draft(self, block: Block, t_verify_s: float, batch: int = 1) -> Message:
        """Finish the kept DRAFT with the target's block (verified alone or in a batch)."""
        msg, proto, tokens = self.incoming
        ext, self.incoming, self.extension = self.extension, None, []
        mism = self.shape.mismatches(tokens, block)
        csi = _csi_of(msg.header.get("csi"))
        queried = proto.query(mism)
        pend = _Pending(msg.header["round"], tokens, msg.tensors, block, mism, t_verify_s, proto, csi, batch, ext)
        if queried:
            self.pending = pend
            self.round_edge_s = time.perf_counter() - self.msg_t0
            positions = {"positions": np.asarray(queried, np.int32)}
            return self._answer(pend.round, make(MsgType.HIDDEN_REQ, self.sid, positions, round=pend.round))
        h_d = msg.tensors.get("hidden")
        return self._finish(pend, None if h_d is None else h_d[mism], msg.tensors.get("probs"))

    def on_hidden(self, msg: Message) -> Message:
        """Finish the pending SH round with the uploaded hidden states."""
        p, got = self.pending, msg.header["round"]
        last = self.answered
        if p is None and last is not None and last[0] == got and last[1].type == MsgType.VERDICT:
            return last[1]  # a retransmitted HIDDEN of the round just finished
        if p is None or got != p.round:
            raise ProtocolError("bad_state", f"HIDDEN for round {msg.header['round']} with no such pending round")
        hidden = msg.tensors["hidden"]
        if hidden.shape[0] != len(p.mismatches):
            raise ProtocolError("shape_mismatch", f"HIDDEN has {hidden.shape[0]} rows, requested {len(p.mismatches)}")
        self._check_width(hidden)
        self.pending = None
        return self._finish(p, hidden, None)

    def _finish(self, p: _Pending, h_d: np.ndarray | None, probs: np.ndarray | None) -> Message:
        """Decide by the protocol's round (a chain: its rule; a tree: the longest agreeing path), commit, VERDICT."""
        t0 = time.perf_counter()
        v, t_head, path = self.shape.accept(p.tokens, p.tensors, p.block, lambda: self._decide(p, h_d, probs))
        n_edge, both = extend_verdict(p.tokens, p.extension, p.block.argmax.cpu(), v)  # the edge's tokens after
        self._count(self.shape.commit(self.verify, p.tokens + p.extension, both, path))
        now = time.perf_counter()
        t_verify = p.t_verify_s + (now - t0) - t_head
        t_edge, self.round_edge_s = self.round_edge_s + (now - self.msg_t0), 0.0
        named = {} if path is None else {"path": np.asarray(path, np.int32)}  # [n_accepted] a tree's path
        edge = {"edge_drafted": len(p.extension)} if p.extension else {}
        if p.extension:
            named["edge_tokens"] = np.asarray(p.extension[:n_edge], np.int32)  # [e] committed after the draft
        if self.feature_rows:
            named["features"] = target_features(p.block, both.n_accepted, path, self.feature_rows)  # [n, d_t] fp16
        return self._answer(p.round, make(
            MsgType.VERDICT, self.sid, named, round=p.round, n_accepted=v.n_accepted, next_token=both.next_token,
            mismatches=len(p.mismatches), queried=len(p.protocol.query(p.mismatches)), t_verify_s=t_verify,
            t_head_s=t_head, t_edge_s=t_edge, batch=p.batch, done=self.done, **edge))

    def _answer(self, round_: int, reply: Message) -> Message:
        """Keep a round's reply for retransmissions; a VERDICT ends the round, the next DRAFT carries round + 1."""
        self.answered = (round_, reply)
        if reply.type == MsgType.VERDICT:
            self.next_round = round_ + 1
        return reply

    def _count(self, committed: list[int], indexed: bool = False) -> None:
        """Count a round's committed tokens against the budget; the session is done at the budget or EOS.  They join
        the edge drafter's index (unless already ``indexed``); a finished session's output stays there."""
        committed = truncate_output(committed, self.max_new - self.generated, self.eos)
        self.last_committed = committed  # the round's tokens, as the UE commits them (the edge's journal records them)
        self.generated += len(committed)
        self.context += committed
        self.rounds += 1
        self.done = self.generated >= self.max_new or (self.eos is not None and committed[-1] == self.eos)
        if self.drafter is not None:
            if not indexed:
                self.drafter.commit(self.key, committed)
            if self.done:
                self.drafter.close(self.key, ended=True)

    def release(self) -> None:
        """The edge dropped the session: its sequence leaves the drafter's index (a finished one stays there)."""
        if self.drafter is not None:
            self.drafter.close(self.key, ended=self.done)

    def _decide(self, p: _Pending, h_d: np.ndarray | None, probs: np.ndarray | None) -> tuple[Verdict, float]:
        draft = torch.tensor(p.tokens, dtype=torch.long)
        argmax = p.block.argmax.cpu()
        if p.protocol.rule == "sampling":
            return self._sample(draft, p.block, probs), 0.0
        if p.protocol.rule == "greedy" or not p.mismatches:
            return greedy_accept_ids(draft, argmax), 0.0
        sib = self.verify.verify_siblings(p.tokens, p.mismatches, argmax[p.mismatches].tolist()) if self.sibling \
            else None  # verification work: counted in t_verify, not in the head's time
        t0 = time.perf_counter()
        hd = None if h_d is None else torch.from_numpy(np.asarray(h_d, dtype=np.float32))  # [m, d_d]
        ht = p.block.hidden[p.mismatches].cpu()  # [m, d_t]
        ef = edge_features(p.block.logits.cpu(), p.block.hidden.cpu(), p.tokens, p.mismatches, sib, self.generated)
        reject = self.policy.reject_probs(hd, ht, p.mismatches, p.csi, ef)
        t_head = time.perf_counter() - t0
        return wisv_accept(draft, argmax, reject, self.policy.threshold(self.tau, p.csi), self.eos), t_head

    def _sample(self, draft: torch.Tensor, block: Block, probs: np.ndarray) -> Verdict:
        q = torch.from_numpy(np.asarray(probs, dtype=np.float64))  # [K, V'] fp16 on the wire
        q = q / q.sum(dim=-1, keepdim=True)
        return speculative_sampling_from_logits(draft, q, block.logits, self.temperature, self.gen)

    def _round_protocol(self, named: str | None) -> Protocol:
        name = named or self.protocol_name
        if name not in ROUND_PROTOCOLS:
            raise ProtocolError("bad_protocol", f"DRAFT names protocol {name!r}; expected one of {ROUND_PROTOCOLS}")
        allowed = WISV_PROTOCOLS if get_protocol(self.protocol_name).desc.chooses else (self.protocol_name,)
        if name not in allowed:
            raise ProtocolError("bad_protocol", f"DRAFT uses {name!r} in a {self.protocol_name!r} session")
        return get_protocol(name)

    def _check_draft(self, proto: Protocol, msg: Message, k: int) -> None:
        if k > self.draft_len:
            raise ProtocolError("too_large", f"DRAFT has {k} tokens, session draft_len is {self.draft_len}")
        self.shape.check_draft(proto.name, msg.tensors)
        if "hidden" in proto.desc.uplink and "hidden" not in msg.tensors:
            raise ProtocolError("missing_tensor", f"{proto.name} DRAFT without 'hidden'")
        if proto.desc.head and not proto.desc.uploads_hidden and "hidden" in msg.tensors:
            raise ProtocolError("bad_tensor", f"an {proto.name} DRAFT carries token ids only, not 'hidden'")
        if proto.rule == "sampling":
            self._check_probs(msg)
        if "hidden" in msg.tensors:
            self._check_width(msg.tensors["hidden"])

    def _check_probs(self, msg: Message) -> None:
        probs = msg.tensors.get("probs")
        if probs is None:
            raise ProtocolError("missing_tensor", "reject DRAFT without 'probs'")
        tokens = msg.tensors["tokens"]
        if int(tokens.max()) >= probs.shape[1]:
            raise ProtocolError("token_range", f"token {int(tokens.max())} outside the {probs.shape[1]}-wide 'probs'")
        sums = probs.astype(np.float64).sum(axis=1)
        if not (np.isfinite(sums).all() and (sums > 0).all() and (probs >= 0).all()):
            raise ProtocolError("bad_value", "'probs' rows must be non-negative with a finite positive sum")

    def _check_width(self, hidden: np.ndarray) -> None:
        if self.drafter_hidden is not None and hidden.shape[1] != self.drafter_hidden:
            raise ProtocolError("shape_mismatch", f"hidden width {hidden.shape[1]} != drafter_hidden "
                                                  f"{self.drafter_hidden} declared at OPEN")


def feature_grant(asked: int, verify) -> int:
    """Target-feature rows the edge grants a UE that asked for ``asked``: all of them when its verification pass
    yields the target's final-layer hidden states (hidden_layer -1), else none."""
    return asked if asked and getattr(verify, "hidden_layer", -1) == -1 else 0


def target_features(block: Block, n_accepted: int, path: list[int] | None, rows: int) -> np.ndarray:
    """The target's final-layer hidden states at the last ``rows`` committed positions of a round, [n, d_t] fp16.

    Block row 0 is the state after the last committed token, row 1 + i the state after draft node i; a chain commits
    rows 0..n_accepted, a tree row 0 and its path's nodes.  The last row is the state whose LM head gave the
    VERDICT's next token: what an EAGLE-style drafter reads with that token's embedding to draft the next block."""
    chain = list(range(n_accepted + 1)) if path is None else [0] + [1 + i for i in path]  # [n_accepted + 1]
    return block.hidden[chain[-rows:]].cpu().numpy().astype(np.float16)


def _slo_of(meta: dict | None) -> float | None:
    """The SLO token speed a UE declares in OPEN meta ('slo_tok_s'), validated."""
    slo = (meta or {}).get("slo_tok_s")
    if slo is None:
        return None
    if isinstance(slo, bool) or not isinstance(slo, (int, float)) or not 0 < slo < float("inf"):
        raise ProtocolError("bad_field", f"OPEN meta slo_tok_s must be a finite number > 0, got {slo!r}")
    return float(slo)


def _check_head_width(policy: MismatchPolicy, protocol: str, drafter_hidden: int | None) -> None:
    """Refuse at OPEN a WISV session whose drafter hidden size the edge's decision head cannot take, and an ef session
    on a head that reads the drafter's hidden states (ef uploads none)."""
    if not get_protocol(protocol).desc.serves(tuple(policy.inputs)):
        raise ProtocolError("unsupported", "this edge's decision head reads the drafter's hidden states, which ef does "
                                           "not upload: use fh, sh or auto")
    want = policy.d_draft
    if (want is not None and drafter_hidden is not None and get_protocol(protocol).rule == "wisv"
            and drafter_hidden != want):
        raise ProtocolError("shape_mismatch", f"drafter hidden size mismatch: this edge's decision head takes drafter "
                                              f"hidden size {want}, the UE's drafter declared {drafter_hidden} at OPEN")


def _csi_of(d: dict | None) -> CSI | None:
    """The UE's measured CSI from a DRAFT header, or None when absent or malformed."""
    if not d:
        return None
    try:
        return CSI.from_dict(d)
    except (ValueError, TypeError, KeyError):
        return None
