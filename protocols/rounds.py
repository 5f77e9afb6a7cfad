"""A protocol's round on both sides, where a chain and a tree differ: ``ChainRounds`` here, for every chain protocol
(greedy, reject, fh, sh, ef, auto); ``TreeRounds`` in protocols/tree.py.  A protocol names its class in the registry
(``Protocol.rounds``).

The sessions (protocols/ue_side.py, protocols/edge_side.py) call these for each step of a round and read no
protocol flag: on the UE the block's size, its draft, the proactive tokens, what the VERDICT commits, what the window
learns and the record's columns; on the edge the engine's check, the DRAFT's tensors, the verification pass, the
acceptance and the commit.  Both read what a UE session knows (``UEParams``, ``RoundState``), defined here.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from channel.csi import CSI
from protocols.errors import EdgeError, ProtocolError
from protocols.handshake import Vocab
from protocols.typed import Verdict
from wisv.decoding.acceptance import Verdict as Accepted
from wisv.decoding.acceptance import mismatch_positions
from wisv.decoding.sessions import Block, Draft, Drafting, VerifySession
from wisv.decoding.specedge import proactive_reuse
from wisv.decoding.treedraft import TreeState
from wisv.serving.engine import VerifyRequest
from wisv.serving.wdt import confidence_summary
from wisv.timing.handover import HandOver
from wisv.timing.kpolicy import KFacts, block_k
from wisv.timing.latency import PayloadBits
from wisv.timing.protodesc import describe
from wisv.timing.window import AUTO_DRAFT_LEN, WindowTracker

AUTO_START_K = 8  # auto's window before its first verdict (nothing measured yet)


@dataclass(kw_only=True)
class UEParams:
    """What a UE session needs besides the drafter (by keyword)."""

    protocol: str = "auto"  # a protocol's name (protocols.registry.PROTOCOLS)
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
    target_features: int = 0  # target-feature rows asked for at OPEN, carried by each VERDICT (0: none; EAGLE head)
    stream_every_tokens: int | None = None  # server-only and on-device: a chunk ends at this many tokens
    stream_every_ms: float | None = None  # or this long after the previous chunk, ms (neither: every token a chunk)
    run_part_tokens: int | None = None  # auto: a handed-over run's parts hold at most this many tokens (None: the
    #   largest that arrives well within the reply timeout)
    reply_timeout_s: float | None = None  # how long the UE waits for a reply (auto's hand-over asks for its run in
    #   parts that arrive well within it: wisv.timing.handover.max_chunk_tokens); None: no bound
    lookup_stop_streak: int = 0  # auto with a prompt-lookup drafter: the edge ends a handed-over run after this many
    #   tokens in a row the lookup named first, and the UE speculates (0: runs go to their end)

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
    t_proactive_s: float = 0.0  # drafting past the block while it was verified, s
    columns: dict | None = None  # the protocol's own record fields, once committed (RoundRow fields)
    t_start_s: float | None = None  # perf_counter when drafting the block began
    t_round_s: float | None = None  # draft start to the VERDICT's arrival, s (set when it commits)
    choice: HandOver | None = None  # auto: the hand-over choice that let the round speculate (its two predictions)
    prefilled: bool = False  # the block's drafting began with the drafter's prefill of the prompt (its first)
    t_prefill_s: float | None = None  # of its drafting, the drafter's timed read of the prompt, s (None: untimed)


@dataclass(frozen=True, kw_only=True)
class AutoWindow:
    """What --draft-len auto (a tree's --tree-budget auto) reads when it sizes a block, besides the K rules' facts."""

    tracker: WindowTracker  # what it learned so far (a UE's prompts share it)
    csi: CSI  # the estimated link (ideal when none is known)
    pb: PayloadBits  # the wire's payload constants
    protocol: str  # the protocol the time model prices (cost_terms)
    mismatch_rate: float  # SH's recent queries per drafted token
    wisp: Callable | None  # the WISP rejection predictor's stop rule, which still ends a block


class ChainRounds:
    """A chain protocol's round: the UE drafts a block of K tokens (K by wisv/timing/kpolicy.py), the edge verifies
    it in one pass and accepts a prefix by the protocol's rule; proactive tokens carry over when all are accepted."""

    start_k = AUTO_START_K  # the auto window's K before the first verdict

    # -- the UE's side
    def tracker(self, p: UEParams) -> WindowTracker:
        """What --draft-len auto learns (a UE's prompts share it)."""
        return WindowTracker(1, p.draft_len_max)

    def auto_sized(self, p: UEParams) -> bool:
        """The block's size is chosen per round (--draft-len auto)."""
        return p.auto_window

    def k_max(self, p: UEParams) -> int:
        """The largest block before the budget's cap."""
        return p.draft_len_max if p.auto_window else p.draft_len

    def block_max(self, p: UEParams) -> int:
        """The most tokens one DRAFT carries (OPEN's draft_len)."""
        return self.k_max(p)

    def k_rules(self, facts: KFacts) -> KFacts:
        """The facts the K rules read (a chain: all four rules)."""
        return facts

    def size(self, facts: KFacts, auto: AutoWindow | None) -> tuple[int, int | None, Callable | None]:
        """(the block's K by the rules of wisv/timing/kpolicy.py; the window ``auto`` chose and its stop rule, None
        when it is off)."""
        if auto is None:
            return block_k(self.k_rules(facts)), None, None
        chosen = {}

        def window(k_cap: int) -> int:
            k, chosen["window"], chosen["stop"] = self.auto_window(auto, k_cap)
            return k
        k = block_k(self.k_rules(facts), window)
        return k, chosen["window"], chosen["stop"]

    def auto_window(self, a: AutoWindow, k_cap: int) -> tuple[int, int, Callable | None]:
        """Rule 3, the auto window: (tokens the block may hold, the window chosen, the stop rule).  K minimises the
        predicted time per committed token under the estimated CSI (wisv.timing.window), at most ``k_cap``; drafting
        ends before K when the drafter's confidence says the next token is not worth its time (the WISP stop rule,
        when given, still ends it too).  Confidence never extends a block past K: in the simulator that drafted ~2x K
        and cost 15% (testbed/sim/window.py's auto-extend)."""
        w = a.tracker
        if w.tau_d_s is None:  # nothing measured yet
            k = min(self.start_k, k_cap)
            return k, k, a.wisp
        round_s = w.round_s(a.protocol, a.csi, a.pb, a.mismatch_rate)
        choice = w.choose(round_s, k_cap)
        rule, wisp = w.stop_rule(round_s), a.wisp
        n = [1]

        def stop(features: torch.Tensor) -> bool:
            if (wisp is not None and wisp(features)) or rule(float(features[0]), n[0]):
                return True
            n[0] += 1
            return False
        return choice.k, choice.k, stop

    def cost_terms(self, protocol: str, features: bool, mismatch_rate: float) -> tuple[str, bool, float]:
        """The time model's terms of a round: the protocol it prices (a chooser, auto: what it is priced as, fh),
        DRAFT carries features, SH's rate."""
        return describe(protocol).priced_as or protocol, features, mismatch_rate

    def draft(self, d: Drafting, k: int, *, sample: bool, temperature: float, generator: torch.Generator,
              eos: int | None, stop: Callable | None) -> tuple[Draft, TreeState | None]:
        """The block: K tokens from the drafter (sampled for reject), ended early by ``stop``."""
        return d.draft(k, sample=sample, temperature=temperature, generator=generator, eos_token_id=eos,
                       stop=stop), None

    def draft_more(self, d: Drafting, r: RoundState, n: int, reply_waiting: Callable[[], bool]) -> Draft:
        """Up to ``n`` tokens past the block while it is verified (SpecEdge)."""
        return d.draft_more(n, reply_waiting)

    def settle(self, d: Drafting, r: RoundState, v: Verdict) -> list[int]:
        """Commit the VERDICT's tokens on the drafter, carrying the proactive tokens the next block reuses (all
        accepted and the bonus is p_1); the committed tokens.  The edge's own tokens after a wholly accepted draft
        (``edge_tokens``, --edge-draft) come before the next token: the drafter passes over them in its next
        forward (they were not drafted here, so no proactive token follows them)."""
        if v.edge_tokens and v.n_accepted != len(r.draft.tokens):
            raise EdgeError(f"VERDICT carries {len(v.edge_tokens)} edge tokens after {v.n_accepted} of the "
                            f"{len(r.draft.tokens)}-token draft: they follow a wholly accepted draft only")
        pro, carry = r.proactive, None
        if pro is not None and pro.tokens and not v.edge_tokens:
            reused = proactive_reuse(len(r.draft.tokens), v.n_accepted, v.next_token, pro.tokens)
            r.reused = len(reused)
            carry = Draft(reused, pro.hidden[1:], None, pro.features[1:]) if reused else None
        committed = r.draft.tokens[: v.n_accepted] + list(v.edge_tokens) + [v.next_token]
        d.commit(committed, carry)
        return committed

    def learn(self, window: WindowTracker, r: RoundState, v: Verdict, p: UEParams) -> None:
        """--draft-len auto learns from the verdict: acceptance by confidence, drafting and edge times."""
        if p.auto_window or describe(p.protocol).chooses:  # auto prices its hand-over with the same terms
            conf = r.draft.features[:, 0].tolist() if r.draft.features is not None else None
            window.update(len(r.draft.tokens), v.n_accepted, conf, r.t_draft_s, v.t_edge_s, t_round_s=r.t_round_s,
                          prefilled=r.prefilled, t_prefill_s=r.t_prefill_s)

    def columns(self, r: RoundState) -> dict:
        """The block's draft-confidence summary (RoundRow draft_* fields: the WDT predictor's training data)."""
        f = r.draft.features
        return confidence_summary(f[:, :3].numpy()) if f is not None and len(f) else {}

    # -- the edge's side
    def refusal(self, verify: VerifySession, asks: tuple[str, ...] = ()) -> str | None:
        """Why this edge's engine cannot serve the protocol (None: it can), by what its description ``asks`` of the
        engine: "trees", which an engine without tree verification (vLLM's) cannot serve."""
        if "trees" not in asks or getattr(verify, "takes_trees", hasattr(verify, "verify_tree")):
            return None
        return getattr(verify, "tree_refusal", "this edge's engine takes no draft trees")

    def request(self, sid: str, tokens: list[int], tensors: dict[str, np.ndarray]) -> VerifyRequest:
        """The engine's request for the block (what a batching edge verifies with others): a chain's tokens."""
        return VerifyRequest(sid, tokens)

    def check_draft(self, protocol: str, tensors: dict[str, np.ndarray]) -> None:
        """The DRAFT's shape tensors: a chain carries no 'parents'."""
        if "parents" in tensors:
            raise ProtocolError("bad_tensor", f"a {protocol} DRAFT takes no 'parents'")

    def verify(self, verify: VerifySession, tokens: list[int], tensors: dict[str, np.ndarray]) -> Block:
        """One target pass over the block."""
        return verify.verify(tokens)

    def mismatches(self, tokens: list[int], block: Block) -> list[int]:
        """Positions where the block and the target's argmax differ (what the protocol's rule decides)."""
        return mismatch_positions(torch.tensor(tokens), block.argmax.cpu())

    def accept(self, tokens: list[int], tensors: dict[str, np.ndarray], block: Block,
               by_rule: Callable[[], tuple[Accepted, float]]) -> tuple[Accepted, float, list[int] | None]:
        """(the verdict, the head's seconds, the accepted tree path: none for a chain) by the protocol's rule."""
        v, t_head = by_rule()
        return v, t_head, None

    def commit(self, verify: VerifySession, tokens: list[int], v: Accepted, path: list[int] | None) -> list[int]:
        """Roll the target's cache to the committed prefix; the committed tokens."""
        return verify.commit(tokens, v.n_accepted, v.next_token)

