"""The tree protocol's round on both sides (SpecEdge's tree drafting, wisv/decoding/tree.py).

The UE drafts a best-first token tree of N tokens (``--tree-budget``, or chosen per round), uploaded as token ids
plus parent indices; the edge verifies it in one pass under a tree mask, accepts the longest root path that agrees
with the target's argmax and names it in the VERDICT.  While the tree is verified the UE grows its most probable leaf
(proactive expansion), and the next tree reuses those tokens on complete alignment.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from protocols.errors import EdgeError, ProtocolError
from protocols.rounds import ChainRounds, RoundState, UEParams
from protocols.typed import Verdict
from wisv.decoding.acceptance import Verdict as Accepted
from wisv.decoding.sessions import Block, Draft, DraftSession, VerifySession
from wisv.decoding.tree import greedy_path, path_to
from wisv.decoding.treedraft import TreeState, aligned, draft_tree, expand_leaf
from wisv.serving.engine import VerifyRequest
from wisv.timing.kpolicy import KFacts
from wisv.timing.window import TreeWindowTracker, WindowTracker

TREE_START_N = 16  # the auto budget before the first verdict (nothing measured yet)


class TreeRounds(ChainRounds):
    """The tree protocol's steps where a tree differs from a chain (ChainRounds)."""

    start_k = TREE_START_N

    # -- the UE's side
    def tracker(self, p: UEParams) -> WindowTracker:
        """--tree-budget auto learns a tree's accepted depth per budget (a TreeWindowTracker)."""
        return TreeWindowTracker(1, p.draft_len_max) if p.auto_tree else WindowTracker(1, p.draft_len_max)

    def auto_sized(self, p: UEParams) -> bool:
        return p.auto_tree

    def k_max(self, p: UEParams) -> int:
        return p.draft_len_max if p.auto_tree else p.tree_budget

    def block_max(self, p: UEParams) -> int:
        """A tree's budget plus a carried proactive chain."""
        return self.k_max(p) + p.proactive

    def k_rules(self, facts: KFacts) -> KFacts:
        """A tree's budget N follows the cap and the auto budget only (no stop depth, no pipeline depth)."""
        return replace(facts, stop_depth=None, verify_s=None)

    def cost_terms(self, protocol: str, features: bool, mismatch_rate: float) -> tuple[str, bool, float]:
        return "tree", False, 0.0

    def draft(self, d: DraftSession, k: int, *, sample: bool, temperature: float, generator: torch.Generator,
              eos: int | None, stop: Callable | None) -> tuple[Draft, TreeState | None]:
        """A best-first tree of ``k`` new tokens (a carried chain opens it as a line)."""
        tree = draft_tree(d, k, eos_token_id=eos)
        return Draft(tree.tree.tokens, None, None, parents=tree.tree.parents), tree

    def draft_more(self, d: DraftSession, r: RoundState, n: int, reply_waiting: Callable[[], bool]) -> Draft:
        """Proactive tree expansion: grow the most probable leaf."""
        return Draft(expand_leaf(d, r.tree, n, reply_waiting), None, None)

    def settle(self, d: DraftSession, r: RoundState, v: Verdict) -> list[int]:
        """Commit the path the VERDICT names (checked against the tree sent) and the target's token; the aligned
        proactive tokens carry over."""
        path, parents = list(v.path), r.tree.tree.parents
        if len(path) != v.n_accepted or (path and (max(path) >= len(parents) or path_to(parents, path[-1]) != path)):
            raise EdgeError(f"VERDICT path {path} is not a root path of the {len(parents)}-node tree sent")
        carry = aligned(r.tree, path, v.next_token)
        r.reused = len(carry)
        committed = [r.draft.tokens[i] for i in path] + [v.next_token]
        d.commit(committed, Draft(carry, None, None) if carry else None)
        return committed

    def learn(self, window: WindowTracker, r: RoundState, v: Verdict, p: UEParams) -> None:
        if p.auto_tree and isinstance(window, TreeWindowTracker):
            window.update_tree(len(r.tree.tree.parents), r.tree.tree.depth, v.n_accepted, r.t_draft_s, v.t_edge_s)

    def columns(self, r: RoundState) -> dict:
        """The tree's RoundRow fields."""
        return {"tree_size": len(r.tree.tree), "tree_depth": r.tree.tree.depth, "accepted_depth": r.verdict.n_accepted}

    # -- the edge's side (refusal: the description asks for "trees", ChainRounds.refusal checks the engine)
    def request(self, sid: str, tokens: list[int], tensors: dict[str, np.ndarray]) -> VerifyRequest:
        """A tree's request carries its parent indices: the engine verifies it in a pass of its own (chains batch)."""
        return VerifyRequest(sid, tokens, [int(p) for p in tensors["parents"]])

    def check_draft(self, protocol: str, tensors: dict[str, np.ndarray]) -> None:
        if "parents" not in tensors:
            raise ProtocolError("missing_tensor", f"a {protocol} DRAFT needs 'parents'")

    def verify(self, verify: VerifySession, tokens: list[int], tensors: dict[str, np.ndarray]) -> Block:
        """One target pass over the tree under its tree mask."""
        return verify.verify_tree(tokens, [int(p) for p in tensors["parents"]])

    def mismatches(self, tokens: list[int], block: Block) -> list[int]:
        return []  # a tree's nodes are alternatives: its acceptance is a path, not a chain's first mismatch

    def accept(self, tokens: list[int], tensors: dict[str, np.ndarray], block: Block,
               by_rule: Callable[[], tuple[Accepted, float]]) -> tuple[Accepted, float, list[int] | None]:
        """Greedy tree acceptance: the longest agreeing root path and the target's next token."""
        path, nxt = greedy_path(tokens, [int(p) for p in tensors["parents"]], block.argmax.tolist())
        return Accepted(len(path), nxt), 0.0, path

    def commit(self, verify: VerifySession, tokens: list[int], v: Accepted, path: list[int] | None) -> list[int]:
        return verify.commit_path(tokens, path, v.next_token)
