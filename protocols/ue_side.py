"""UE side of a session as a state machine over messages: draft a block, upload it, answer HIDDEN_REQ, commit.

The socket shell (testbed/live/ue.py) sends what ``open_message``/``next_draft``/``on_reply`` return and
measures time; everything protocol-specific lives here.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from channel.csi import CSI
from protocols.accounting import wire_payload_bits
from protocols.auto import MismatchStats, choose
from protocols.handshake import Vocab, vocab_refusal
from protocols.registry import HIDDEN_PROTOCOLS, Protocol, get_protocol, servable
from protocols.schema import OpenOk, Verdict
from protocols.wire import Message, MsgType, make
from wisv.decoding.sessions import Draft, DraftSession
from wisv.decoding.specedge import proactive_reuse
from wisv.decoding.speculative import truncate_output
from wisv.decoding.tree import path_to
from wisv.decoding.treedraft import TreeState, aligned, draft_tree, expand_leaf
from wisv.timing.kpolicy import KFacts, block_k
from wisv.timing.window import AUTO_DRAFT_LEN, TreeWindowTracker, WindowTracker, round_cost


class EdgeError(RuntimeError):
    """The edge answered with an ERROR message (``code``: its code, when it came from one)."""

    def __init__(self, text: str, code: str | None = None):
        super().__init__(text)
        self.code = code


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


AUTO_START_K = 8  # auto's window before its first verdict (nothing measured yet)


@dataclass(kw_only=True)
class UEParams:
    """What a UE session needs besides the drafter (by keyword)."""

    protocol: str = "auto"  # greedy | reject | fh | sh | auto
    draft_len: int = 8  # K, tokens per block (AUTO_DRAFT_LEN: chosen per round by wisv.timing.window, <= draft_len_max)
    max_new_tokens: int = 160  # generation budget per prompt
    auto_rule: str = "cost"  # auto's FH/SH rule: cost (eqs. 6/10) | rtt (FH if RTT > 10 ms)
    temperature: float = 1.0  # sampling temperature (reject)
    seed: int = 0  # sampling seed (reject; the edge gets seed + 1)
    vocab_size: int = 0  # for the cost model's payload constants (reject probs width)
    proactive: int = 0  # SpecEdge: draft up to this many tokens past the block while it is verified (0: off)
    pipeline_depth: bool = False  # SpecEdge: K with K * tau_d + RTT ~= the edge's last verify time (<= draft_len)
    tree_budget: int = 16  # tree: draft tokens per tree (a carried proactive chain comes on top)
    vocab: Vocab | None = None  # the drafter's vocabulary, declared at OPEN (None: not declared, not checked)
    draft_len_max: int = 32  # --draft-len auto: the largest K it may choose
    follow_stop_depth: bool = False  # without a local predictor: K <= the stop depth the edge's last VERDICT suggests
    features: bool = False  # DRAFT carries each token's draft features [K, 3] fp16 (the edge's WDT predictor)

    @property
    def auto_window(self) -> bool:
        return self.draft_len == AUTO_DRAFT_LEN

    @property
    def auto_tree(self) -> bool:
        """--tree-budget auto: the tree's budget chosen per round (<= draft_len_max)."""
        return self.tree_budget == AUTO_DRAFT_LEN


@dataclass
class RoundState:
    """What the UE knows about the round in flight."""

    index: int
    protocol: str  # protocol actually used this round (auto resolves to fh or sh)
    draft: Draft
    t_draft_s: float
    verdict: Verdict | None = None  # the VERDICT once it arrives
    proactive: Draft | None = None  # tokens drafted past the block while waiting (SpecEdge)
    reused: int = 0  # proactive tokens that open the next block
    tree: TreeState | None = None  # the tree in flight (tree protocol)
    window: int | None = None  # K --draft-len auto chose for this block (None: a fixed window)


class UESession:
    """Drives one prompt: OPEN, rounds of DRAFT/(HIDDEN_REQ/HIDDEN)/VERDICT, CLOSE."""

    def __init__(self, sid: str, drafter: DraftSession, params: UEParams, eos_token_id: int | None,
                 stop: Callable[[torch.Tensor], bool] | None = None, window: WindowTracker | None = None):
        self.sid, self.d, self.p, self.eos = sid, drafter, params, eos_token_id
        self.stop = stop  # WISP rejection predictor: end the block at the first predicted rejection
        self.proto: Protocol = get_protocol(params.protocol)
        auto = TreeWindowTracker if params.auto_tree and self.proto.tree else WindowTracker
        self.window = window or auto(1, params.draft_len_max)  # --draft-len/--tree-budget auto (a UE's prompts share it)
        self.gen = torch.Generator().manual_seed(params.seed)
        self.stats = MismatchStats()
        self.tokens: list[int] = []
        self.done = False
        self.round: RoundState | None = None
        self.n_rounds = 0
        self.token: dict[str, str] = {}  # {"token": the edge's session token} once OPEN_OK gave one
        self.servable: tuple[str, ...] = HIDDEN_PROTOCOLS  # the WISV protocols the edge's head serves (OPEN_OK)

    def open_message(self) -> Message:
        """OPEN with the committed prefix (the prompt, plus the tokens committed so far when the session is resumed
        after the edge lost it), the budget left, and the round in flight (or next) as the first round."""
        prompt = np.asarray(self.d.seq, dtype=np.int32)
        vocab = {} if self.p.vocab is None else self.p.vocab.header()
        return make(MsgType.OPEN, self.sid, {"prompt": prompt}, protocol=self.p.protocol, draft_len=self._block_max(),
                    max_new_tokens=self.p.max_new_tokens - len(self.tokens),
                    drafter_hidden=int(self.d.model.config.hidden_size), temperature=float(self.p.temperature),
                    seed=self.p.seed + 1, round=self.n_rounds, **vocab, **self.token)

    def check_open_ok(self, ok: OpenOk) -> None:
        """The UE's own check of the edge's OPEN_OK (the target's tokenizer hash, where both sides have one); keeps
        the session token, which the session's later messages carry."""
        if ok.token is not None:
            self.token = {"token": ok.token}
        self.servable = servable(bool((ok.edge or {}).get("uploads_hidden", True)))
        theirs = ok.vocab_hash
        if self.p.vocab is not None and self.p.vocab.hash and theirs:
            why = vocab_refusal(self.p.vocab, Vocab(self.p.vocab.size, theirs))
            if why:
                raise HandshakeError(why)

    def next_draft(self, csi_est: CSI | None) -> Message:
        """Draft the next block and build its DRAFT message (auto picks FH or SH first)."""
        budget = self.p.max_new_tokens - len(self.tokens)
        auto = {"window": None, "stop": self.stop}  # what rule 3 (the auto window) chose besides K

        def window(k_cap: int) -> int:
            k, auto["window"], auto["stop"] = self._auto_window(csi_est, k_cap)
            return k
        k = block_k(self._k_facts(csi_est, budget), window if self.p.auto_window and not self.proto.tree else None)
        stop, window = auto["stop"], auto["window"]
        proto = self._round_protocol(csi_est, k)
        t0 = time.perf_counter()
        tree = None
        if proto.tree:
            n = max(1, min(self.p.tree_budget, budget - 1))
            if self.p.auto_tree:
                n = window = self._auto_tree(csi_est, max(1, min(self.p.draft_len_max, budget - 1)))
            tree = draft_tree(self.d, n, eos_token_id=self.eos)
            draft = Draft(tree.tree.tokens, None, None, parents=tree.tree.parents)
        else:
            draft = self.d.draft(k, sample=proto.samples, temperature=self.p.temperature, generator=self.gen,
                                 eos_token_id=self.eos, stop=stop)
        t_draft = time.perf_counter() - t0
        self.round = RoundState(self.n_rounds, proto.name, draft, t_draft, tree=tree, window=window)
        header = {"round": self.n_rounds, "t_draft_s": t_draft, "protocol": proto.name}
        if csi_est is not None:
            header["csi"] = csi_est.to_dict()
        tensors = proto.uplink(draft)
        if self.p.features and tree is None and draft.features is not None:
            tensors["features"] = draft.features[:, :3].numpy().astype(np.float16)  # [K, 3]
        return make(MsgType.DRAFT, self.sid, tensors, **header, **self.token)

    def _k_facts(self, csi_est: CSI | None, budget: int) -> KFacts:
        """What the K rules (wisv/timing/kpolicy.py) read: the budget, the cap, the edge's stop depth when followed,
        and for the pipeline depth the last round's verify time and drafting time per token."""
        r = self.round if self.round is not None and self.round.verdict else None
        follow = self.p.follow_stop_depth and self.stop is None and r is not None
        piped = self.p.pipeline_depth and r is not None and r.draft.tokens
        return KFacts(budget_tokens=budget, k_max=self.p.draft_len_max if self.p.auto_window else self.p.draft_len,
                      stop_depth=r.verdict.stop_depth if follow else None,
                      verify_s=r.verdict.t_verify_s if piped else None,
                      tau_d_s=r.t_draft_s / len(r.draft.tokens) if piped else 0.0,
                      rtt_s=csi_est.rtt_ms / 1e3 if csi_est is not None else 0.0)

    def _auto_window(self, csi_est: CSI | None, k_cap: int) -> tuple[int, int, Callable | None]:
        """--draft-len auto: (tokens the block may hold, the window chosen, the stop rule).  K minimises the predicted
        time per committed token under the estimated CSI (wisv.timing.window), at most ``k_cap``; drafting ends
        before K when the drafter's confidence says the next token is not worth its time (the WISP stop rule, when
        given, still ends it too).  Confidence never extends a block past K: in the simulator that drafted ~2x K
        and cost 15% (testbed/sim/window.py's auto-extend)."""
        w = self.window
        if w.tau_d_s is None:  # nothing measured yet
            k = min(AUTO_START_K, k_cap)
            return k, k, self.stop
        name = self.proto.name if self.proto.name != "auto" else "fh"
        pb = wire_payload_bits(int(self.d.model.config.hidden_size), self.p.vocab_size or 1, features=self.p.features)
        rate = min(1.0, self.stats.m_mean / max(1, self.round.window or len(self.round.draft.tokens) or 1)) \
            if self.round is not None else 0.0
        round_s = round_cost(name, csi_est or CSI.ideal(), pb, w.tau_d_s, w.verify.predict_s, rate)
        choice = w.choose(round_s, k_cap)
        rule, wisp = w.stop_rule(round_s), self.stop
        n = [1]

        def stop(features: torch.Tensor) -> bool:
            if (wisp is not None and wisp(features)) or rule(float(features[0]), n[0]):
                return True
            n[0] += 1
            return False
        return choice.k, choice.k, stop

    def _auto_tree(self, csi_est: CSI | None, n_cap: int) -> int:
        """--tree-budget auto: the budget N that minimises the predicted time per committed token (a
        TreeWindowTracker: the tree protocol's link time, the measured drafting and verify times, the accepted depth a
        budget is expected to reach); 16 before the first verdict."""
        w = self.window
        if w.tau_d_s is None:
            return min(16, n_cap)
        pb = wire_payload_bits(int(self.d.model.config.hidden_size), self.p.vocab_size or 1)
        return w.choose(round_cost("tree", csi_est or CSI.ideal(), pb, w.tau_d_s, w.verify.predict_s), n_cap).k

    def draft_proactively(self, reply_waiting: Callable[[], bool]) -> int:
        """While the block is verified, draft up to ``proactive`` more tokens (greedy protocols); returns how many."""
        r = self.round
        if not self.p.proactive or r is None or r.proactive is not None or get_protocol(r.protocol).samples:
            return 0
        if r.tree is not None:  # proactive tree expansion: grow the most probable leaf
            r.proactive = Draft(expand_leaf(self.d, r.tree, self.p.proactive, reply_waiting), None, None)
            return len(r.proactive.tokens)
        r.proactive = self.d.draft_more(self.p.proactive, reply_waiting)
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
        v = Verdict.of(msg.header, msg.tensors)
        if r.tree is not None:
            self._commit_tree(v)
        else:
            self._commit(v)
        return None

    def close_message(self) -> Message:
        return make(MsgType.CLOSE, self.sid, **self.token)

    def _commit(self, v: Verdict) -> None:
        r = self.round
        committed = r.draft.tokens[: v.n_accepted] + [v.next_token]
        self.d.commit(committed, self._carry(r, v))
        self._append(v, committed)

    def _commit_tree(self, v: Verdict) -> None:
        """Commit the tree path the VERDICT names (checked against the tree sent); carry aligned proactive tokens."""
        r, path = self.round, list(v.path)
        parents = r.tree.tree.parents
        if len(path) != v.n_accepted or (path and (max(path) >= len(parents) or path_to(parents, path[-1]) != path)):
            raise EdgeError(f"VERDICT path {path} is not a root path of the {len(parents)}-node tree sent")
        if self.p.auto_tree and isinstance(self.window, TreeWindowTracker):
            self.window.update_tree(len(parents), r.tree.tree.depth, v.n_accepted, r.t_draft_s, v.t_edge_s)
        carry = aligned(r.tree, path, v.next_token)
        r.reused = len(carry)
        committed = [r.draft.tokens[i] for i in path] + [v.next_token]
        self.d.commit(committed, Draft(carry, None, None) if carry else None)
        self._append(v, committed)

    def _append(self, v: Verdict, committed: list[int]) -> None:
        """Record the verdict and the round's output (cut at the budget and EOS); the session may be done."""
        self.round.verdict = v
        r = self.round
        if self.p.auto_window and r.tree is None:
            conf = r.draft.features[:, 0].tolist() if r.draft.features is not None else None
            self.window.update(len(r.draft.tokens), v.n_accepted, conf, r.t_draft_s, v.t_edge_s)
        committed = truncate_output(committed, self.p.max_new_tokens - len(self.tokens), self.eos)
        self.tokens.extend(committed)
        self.stats.update(v.mismatches)
        self.n_rounds += 1
        self.done = v.done or len(self.tokens) >= self.p.max_new_tokens or committed[-1] == self.eos

    def _carry(self, r: RoundState, v: Verdict) -> Draft | None:
        """The proactive tokens the next block reuses (SpecEdge): all accepted and the bonus equals p_1."""
        pro = r.proactive
        if pro is None or not pro.tokens:
            return None
        reused = proactive_reuse(len(r.draft.tokens), v.n_accepted, v.next_token, pro.tokens)
        r.reused = len(reused)
        return Draft(reused, pro.hidden[1:], None, pro.features[1:]) if reused else None

    def _block_max(self) -> int:
        """The most tokens one DRAFT carries (OPEN's draft_len): a tree's budget plus a carried proactive chain."""
        if self.proto.tree:
            return (self.p.draft_len_max if self.p.auto_tree else self.p.tree_budget) + self.p.proactive
        return self.p.draft_len_max if self.p.auto_window else self.p.draft_len

    def _round_protocol(self, csi_est: CSI | None, k: int) -> Protocol:
        if self.proto.name != "auto":
            return self.proto
        if csi_est is None:
            return get_protocol(self.servable[0])
        pb = wire_payload_bits(int(self.d.model.config.hidden_size), self.p.vocab_size or 1)
        return get_protocol(choose(self.p.auto_rule, csi_est, k, self.stats, pb, self.servable))
