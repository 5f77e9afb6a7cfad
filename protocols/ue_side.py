"""UE side of a session as a state machine over messages: draft a block, upload it, answer HIDDEN_REQ, commit.

``UESession.play_round`` runs one round from its draft to its commit over the link it is given
(testbed/live/ue/client.py RoundLink sends, receives and resends); ``next_draft``/``draft_proactively``/``on_reply``
are its steps.  Where a chain and a tree differ, the protocol's round class decides (protocols/rounds.py,
protocols/tree.py).
"""
from __future__ import annotations

import time
import typing
from collections.abc import Callable, Iterator

import numpy as np
import torch

from channel.csi import CSI
from protocols.accounting import wire_payload_bits
from protocols.auto import MismatchStats, choose
from protocols.errors import EdgeError
from protocols.handshake import Vocab, vocab_refusal
from protocols.registry import HIDDEN_PROTOCOLS, Protocol, get_protocol, servable
from protocols.rounds import AutoWindow, RoundState, UEParams
from protocols.typed import OpenOk, Verdict
from protocols.ue_handover import (
    EdgeRound,
    UERun,
    check_spec,
    commit_chunk,
    follow_chunk,
    generate_message,
    hand_over,
    start_run,
)
from protocols.wire import Message, MsgType, make
from wisv.decoding.sessions import Drafting
from wisv.decoding.speculative import truncate_output
from wisv.timing.kpolicy import KFacts
from wisv.timing.window import AUTO_DRAFT_LEN, WindowTracker  # noqa: F401 (AUTO_DRAFT_LEN: read from here)


class HandshakeError(RuntimeError):
    """OPEN was refused for a mismatch between the UE and the edge (version, tokenizer, sizes): no prompt can run."""


REPLY_TO = {MsgType.PING: MsgType.PONG, MsgType.OPEN: MsgType.OPEN_OK, MsgType.CLOSE: MsgType.CLOSED,
            MsgType.REFERENCE: MsgType.REFERENCE_OK}  # the reply each request outside the rounds waits for


def is_current(msg: Message, sid: str | None, round_: int | None = None, want: MsgType | None = None) -> bool:
    """A reply the UE waits for, not a stale one: of its session ``sid`` (an ERROR also when the edge could not read
    the session); an ERROR, or of type ``want`` when given, and of round ``round_`` when given (VERDICT and HIDDEN_REQ
    name their round; a late reply to an earlier, resent request does not)."""
    if sid is not None and msg.session != sid and not (msg.type == MsgType.ERROR and msg.session == "unknown"):
        return False
    if msg.type == MsgType.ERROR:
        return True
    return (want is None or msg.type == want) and (round_ is None or msg.header.get("round") == round_)


def edge_error(msg: Message) -> EdgeError:
    """The EdgeError of an ERROR message."""
    return EdgeError(f"edge error [{msg.header['code']}]: {msg.header['text']}", msg.header["code"])


class Link(typing.Protocol):
    """What a round runs over (testbed/live/ue/client.py RoundLink): it sends, tells whether a reply is waiting, and
    yields the round's replies, resending the DRAFT (or resuming the session) within its retry window."""

    def send(self, msg: Message) -> None: ...

    def expect(self, msg: Message) -> None: ...  # a round whose request went out before: resent only if need be

    def reply_waiting(self) -> bool: ...

    def replies(self) -> Iterator[Message]: ...


class UESession:
    """Drives one prompt: OPEN, rounds of DRAFT/(HIDDEN_REQ/HIDDEN)/VERDICT, CLOSE."""

    def __init__(self, sid: str, drafter: Drafting, params: UEParams, eos_token_id: int | None,
                 stop: Callable[[torch.Tensor], bool] | None = None, window: WindowTracker | None = None):
        self.sid, self.d, self.p, self.eos = sid, drafter, params, eos_token_id
        self.stop = stop  # WISP rejection predictor: end the block at the first predicted rejection
        self.proto: Protocol = get_protocol(params.protocol)
        self.shape = self.proto.rounds()  # the round, where a chain and a tree differ
        self.edge_chunk = 0  # tokens of the last round handed to the edge, when the rounds since were the edge's
        self.unfollowed: list[int] = []  # the last CHUNK's tokens, committed, that the drafter has not passed over yet
        self.run: UERun | None = None  # a round handed to the edge whose parts are still coming
        self.lookup_agrees = False  # the edge ended its last run where the drafter's prompt lookup agrees again
        self.window = window or self.shape.tracker(params)  # --draft-len/--tree-budget auto (a UE's prompts share it)
        self.gen = torch.Generator().manual_seed(params.seed)
        self.stats = MismatchStats()
        self.tokens: list[int] = []
        self.done = False
        self.round: RoundState | None = None
        self.n_rounds = 0
        self.token: dict[str, str] = {}  # {"token": the edge's session token} once OPEN_OK gave one
        self.servable: tuple[str, ...] = HIDDEN_PROTOCOLS  # the WISV protocols the edge's head serves (OPEN_OK)
        self.granted: tuple[int, int] = (0, 0)  # (target-feature rows per VERDICT, their width d_t) from OPEN_OK

    def open_message(self) -> Message:
        """OPEN with the committed prefix (the prompt, plus the tokens committed so far when the session is resumed
        after the edge lost it), the budget left, and the round in flight (or next) as the first round."""
        prompt = np.asarray([*self.d.seq, *self.unfollowed], dtype=np.int32)
        vocab = {} if self.p.vocab is None else self.p.vocab.header()
        asks = {"features": self.p.target_features} if self.p.target_features else {}
        asks |= {"drafter_hidden": self.d.hidden_size} if self.d.hidden_size else {}  # none: a drafter of ids only
        return make(MsgType.OPEN, self.sid, {"prompt": prompt}, protocol=self.p.protocol, draft_len=self._block_max(),
                    max_new_tokens=self.p.max_new_tokens - len(self.tokens),
                    temperature=float(self.p.temperature),
                    seed=self.p.seed + 1, round=self.n_rounds, **vocab, **self.token, **asks)

    def check_open_ok(self, ok: OpenOk) -> None:
        """The UE's own check of the edge's OPEN_OK (the target's tokenizer hash, where both sides have one); keeps
        the session token, which the session's later messages carry."""
        if ok.token is not None:
            self.token = {"token": ok.token}
        if ok.features > self.p.target_features:
            raise HandshakeError(f"the edge grants {ok.features} target-feature rows, the UE asked for "
                                 f"{self.p.target_features}")
        if self.p.target_features and not ok.features:
            raise HandshakeError("the UE's drafter reads the target's features, and this edge grants none (its "
                                 "verification pass does not yield the target's final-layer hidden states)")
        self.granted = (ok.features, ok.target_hidden)
        self.servable = servable(bool((ok.edge or {}).get("uploads_hidden", True)))
        if get_protocol(self.p.protocol).desc.head and not self.d.hidden_size and all(
                get_protocol(p).desc.uploads_hidden for p in self.servable):
            raise HandshakeError("the edge's decision head reads the drafter's hidden states, and this drafter has "
                                 "none (--drafter ngram drafts token ids only): use greedy, or a head that reads none")
        theirs = ok.vocab_hash
        if self.p.vocab is not None and self.p.vocab.hash and theirs:
            why = vocab_refusal(self.p.vocab, Vocab(self.p.vocab.size, theirs))
            if why:
                raise HandshakeError(why)

    def play_round(self, csi_est: CSI | None, link: Link) -> RoundState:
        """One round from draft to commit: send the DRAFT, draft proactively while the edge verifies (SpecEdge),
        answer the replies until the VERDICT commits; the finished round.  A protocol that chooses (auto) may hand
        the round to the edge instead (protocols/ue_handover.py): the edge's round, committed."""
        if self.run is not None:  # a handed-over run's next part: asked for already (again after a timeout)
            link.expect(generate_message(self))
            return self._take_part(link)
        choice = hand_over(self, csi_est)
        if choice is not None and choice.edge_alone:
            start_run(self, choice)
            link.send(generate_message(self))
            return self._take_part(link)
        follow_chunk(self)  # drafting goes on from the last chunk
        self.edge_chunk = 0
        link.send(self.next_draft(csi_est))
        self.round.choice = choice
        t0 = time.perf_counter()
        self.draft_proactively(link.reply_waiting)
        self.round.t_proactive_s = time.perf_counter() - t0
        for reply in link.replies():
            answer = self.on_reply(reply)
            if answer is None:
                break
            link.send(answer)
        return self.round

    def _take_part(self, link: Link) -> EdgeRound:
        """The drafter's pass over the last part while the edge generates the next; that part, committed."""
        follow_chunk(self)
        for reply in link.replies():
            if reply.type == MsgType.ERROR:
                raise edge_error(reply)
            return commit_chunk(self, reply)
        raise EdgeError(f"no reply for the edge's round {self.n_rounds}")

    def next_draft(self, csi_est: CSI | None) -> Message:
        """Draft the next block and build its DRAFT message (auto picks FH or SH first)."""
        k, window, stop = self._block_size(csi_est, self.p.max_new_tokens - len(self.tokens))
        proto = self._round_protocol(csi_est, k)
        prefilled = self.d.prefill_pending  # the drafter reads the prompt first: a prefill in this block's time
        t0 = time.perf_counter()
        draft, tree = self.shape.draft(self.d, k, sample=proto.samples, temperature=self.p.temperature,
                                       generator=self.gen, eos=self.eos, stop=stop)
        t_draft = time.perf_counter() - t0
        self.round = RoundState(self.n_rounds, proto.name, draft, t_draft, tree=tree, window=window, t_start_s=t0,
                                prefilled=prefilled, t_prefill_s=self.d.last_prefill_s if prefilled else None)
        header = {"round": self.n_rounds, "t_draft_s": t_draft, "protocol": proto.name}
        if csi_est is not None:
            header["csi"] = csi_est.to_dict()
        tensors = proto.uplink(draft)
        if self.p.features and draft.features is not None:
            tensors["features"] = draft.features[:, :3].numpy().astype(np.float16)  # [K, 3]
        return make(MsgType.DRAFT, self.sid, tensors, **header, **self.token)

    def _block_size(self, csi_est: CSI | None, budget: int) -> tuple[int, int | None, Callable | None]:
        """(the block's K, a tree's budget; the window --draft-len/--tree-budget auto chose, None when fixed; the
        stop rule) by the K rules (wisv/timing/kpolicy.py) as the protocol's round applies them."""
        auto = self._auto_window(csi_est) if self.shape.auto_sized(self.p) else None
        k, window, stop = self.shape.size(self._k_facts(csi_est, budget), auto)
        return k, window, (self.stop if auto is None else stop)

    def _k_facts(self, csi_est: CSI | None, budget: int) -> KFacts:
        """What the K rules (wisv/timing/kpolicy.py) read: the budget, the cap, the edge's stop depth when followed,
        and for the pipeline depth the last round's verify time and drafting time per token."""
        r = self.round if self.round is not None and self.round.verdict else None
        follow = self.p.follow_stop_depth and self.stop is None and r is not None
        piped = self.p.pipeline_depth and r is not None and r.draft.tokens
        return KFacts(budget_tokens=budget, k_max=self.shape.k_max(self.p),
                      stop_depth=r.verdict.stop_depth if follow else None,
                      verify_s=r.verdict.t_verify_s if piped else None,
                      tau_d_s=r.t_draft_s / len(r.draft.tokens) if piped else 0.0,
                      rtt_s=csi_est.rtt_ms / 1e3 if csi_est is not None else 0.0)

    def _auto_window(self, csi_est: CSI | None) -> AutoWindow:
        """What the auto window reads: the tracker, the link, the payload constants, the recent mismatch rate."""
        rate = min(1.0, self.stats.m_mean / max(1, self.round.window or len(self.round.draft.tokens) or 1)) \
            if self.round is not None else 0.0
        name, features, rate = self.shape.cost_terms(self.proto.name, self.p.features, rate)
        pb = wire_payload_bits(self.d.hidden_size, self.p.vocab_size or 1, features=features)
        return AutoWindow(tracker=self.window, csi=csi_est or CSI.ideal(), pb=pb, protocol=name, mismatch_rate=rate,
                          wisp=self.stop)

    def draft_proactively(self, reply_waiting: Callable[[], bool]) -> int:
        """While the block is verified, draft up to ``proactive`` more tokens (greedy protocols); returns how many."""
        r = self.round
        if not self.p.proactive or r is None or r.proactive is not None or get_protocol(r.protocol).samples:
            return 0
        r.proactive = self.shape.draft_more(self.d, r, self.p.proactive, reply_waiting)
        return len(r.proactive.tokens)

    def on_reply(self, msg: Message) -> Message | None:
        """Answer a HIDDEN_REQ with HIDDEN; on VERDICT commit and return None."""
        if msg.type == MsgType.ERROR:
            raise edge_error(msg)
        r = self.round
        if msg.type == MsgType.HIDDEN_REQ:
            pos = [int(i) for i in msg.tensors["positions"]]
            if max(pos) >= len(r.draft.tokens):
                raise EdgeError(f"HIDDEN_REQ positions {pos} outside the {len(r.draft.tokens)}-token block")
            hidden = r.draft.hidden[pos].numpy().astype(np.float16)  # [m, d_d]
            return make(MsgType.HIDDEN, self.sid, {"hidden": hidden}, round=r.index, **self.token)
        if msg.type != MsgType.VERDICT:
            raise EdgeError(f"unexpected {msg.type.name} during round {r.index}")
        self._commit(Verdict.of(msg.header, msg.tensors))
        return None

    def close_message(self) -> Message:
        return make(MsgType.CLOSE, self.sid, **self.token)

    def follow_last(self) -> None:
        """After the prompt's last token arrived (off its latency, in the device's idle time before the next): the
        drafter's pass over the last CHUNK, whose agreement the UE's next prompt chooses with (auto: a prompt the edge
        generated in one chunk would otherwise teach speculation's price nothing); nothing when none is pending."""
        follow_chunk(self)

    def _commit(self, v: Verdict) -> None:
        """Commit what the VERDICT accepted (carrying reusable proactive tokens), learn, record; the session may be
        done (at the budget or EOS)."""
        r = self.round
        r.t_round_s = time.perf_counter() - r.t_start_s if r.t_start_s is not None else None
        committed = self.shape.settle(self.d, r, v)
        if v.features is not None:
            self._take_features(v.features)
        self.shape.learn(self.window, r, v, self.p)
        r.verdict = v
        r.columns = self.shape.columns(r)
        if self.granted[0]:
            r.columns["feature_bytes"] = 0 if v.features is None else int(v.features.nbytes)
        committed = truncate_output(committed, self.p.max_new_tokens - len(self.tokens), self.eos)
        self.tokens.extend(committed)
        check_spec(self.window, r.choice, r.t_round_s, len(committed), r.prefilled)
        self.stats.update(v.mismatches)
        self.n_rounds += 1
        self.done = v.done or len(self.tokens) >= self.p.max_new_tokens or committed[-1] == self.eos

    def _take_features(self, f: np.ndarray) -> None:
        """Hand the VERDICT's target features [n, d_t] to the drafter, after checking them against the grant."""
        rows, width = self.granted
        if f.shape[0] > rows or f.shape[1] != width:
            raise EdgeError(f"VERDICT features of shape {list(f.shape)}; the edge granted {rows} rows of width {width}")
        self.d.take_features(torch.from_numpy(f.astype(np.float32)))  # [n, d_t]

    def _block_max(self) -> int:
        """The most tokens one DRAFT carries (OPEN's draft_len)."""
        return self.shape.block_max(self.p)

    def _round_protocol(self, csi_est: CSI | None, k: int) -> Protocol:
        if not self.proto.desc.chooses:
            return self.proto
        if csi_est is None:
            return get_protocol(self.servable[0])
        pb = wire_payload_bits(self.d.hidden_size, self.p.vocab_size or 1)
        return get_protocol(choose(self.p.auto_rule, csi_est, k, self.stats, pb, self.servable))
