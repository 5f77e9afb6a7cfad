"""The drafter's side of tree drafting on a DraftSession's KV cache: build a tree, expand its best leaf proactively.

Cache layout during a round: ``seq`` and the carried chain (proactive tokens reused from the last round) as usual,
then the tree's *expanded* nodes in the order of the drafter's calls (``TreeState.slots``), then the proactive
expansion.  ``DraftSession.commit`` crops everything past the committed prefix (the carried chain is
``DraftSession.drafted``, so its agreeing part is kept): tree branches never outlive their round.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from wisv.decoding.sessions import DraftSession
from wisv.decoding.tree import DraftTree, build_tree, node_mask, path_to, tree_positions


@dataclass
class TreeState:
    """The tree in flight and where its nodes sit in the drafter's cache."""

    tree: DraftTree  # the whole tree sent: carried chain first, then the best-first part
    base: int  # cached positions before the tree's first node (seq plus nothing of the tree)
    slots: list[int] = field(default_factory=list)  # nodes whose KV is cached after base, in cache order
    leaf: int = -1  # the expansion head (-1: none yet)
    proactive: list[int] = field(default_factory=list)  # tokens drafted past the head while the tree is verified
    greedy: dict[int, int] = field(default_factory=dict)  # cached node -> the drafter's argmax after it


Score = Callable[[torch.Tensor], torch.Tensor]  # [m, V] drafter log-probs -> [m, V] log-scores (wisv.decoding.treecal)


def draft_tree(d: DraftSession, budget: int, width: int = 1, max_depth: int = 64, eos_token_id: int | None = None,
               score: Score | None = None, children: int | None = None) -> TreeState:
    """Draft a tree of up to ``budget`` new nodes after ``seq``; a carried chain (``d.carry``) opens it as a line.
    ``score`` ranks candidates (None: the drafter's log-probabilities); ``children`` caps children per node."""
    rank = score or (lambda logp: logp)
    carry = d.carry.tokens if d.carry is not None else []
    d.carry, d.drafted = None, list(carry)
    base = len(d.seq)
    logits, _ = d.forward((d.seq + carry)[d.cached_len:])
    chain = list(range(len(carry)))
    prefix = DraftTree(list(carry), [i - 1 for i in chain], [0.0] * len(carry))
    st = TreeState(prefix, base, slots=chain)
    if carry:
        st.greedy[len(carry) - 1] = int(logits[-1].argmax())

    def expand(sub: DraftTree, grow: list[int]) -> torch.Tensor:
        st.tree = graft(prefix, sub)
        nodes = [len(carry) + i for i in grow]
        out = _feed(d, st, nodes)
        return rank(torch.log_softmax(out.float(), dim=-1))

    root = rank(torch.log_softmax(logits[-1].float(), dim=-1))
    room = max(0, max_depth - len(carry))
    sub = build_tree(root, expand, budget if room else 0, width, max(room, 1), eos_token_id, children)
    st.tree = graft(prefix, sub)
    st.tree.calls = sub.calls
    return st


def expand_leaf(d: DraftSession, st: TreeState, m: int, should_stop: Callable[[], bool]) -> list[int]:
    """Proactive tree expansion (SpecEdge): greedily extend the most probable leaf by up to ``m`` tokens while
    ``should_stop()`` is False (checked before each drafter call); returns the tokens drafted."""
    if not len(st.tree) or m < 1:
        return []
    st.leaf = st.tree.best_leaf()
    chain = DraftTree(list(st.tree.tokens), list(st.tree.parents), list(st.tree.logp))
    node, work = st.leaf, TreeState(chain, st.base, st.slots, greedy=st.greedy)
    while len(st.proactive) < m and not should_stop():
        if node not in st.greedy:  # an expanded node (cached) already has its next token
            _feed(d, work, [node])
        y = st.greedy[node]
        st.proactive.append(y)
        chain.tokens.append(y)
        chain.parents.append(node)
        chain.logp.append(0.0)
        node = len(chain) - 1
    return list(st.proactive)


def aligned(st: TreeState, path: list[int], next_token: int) -> list[int]:
    """The proactive tokens the next tree reuses: complete alignment means the accepted path ends on the expansion
    head and the target's next token is the first proactive token; then the rest carries over, otherwise nothing."""
    if st.leaf < 0 or not st.proactive or path != path_to(st.tree.parents, st.leaf) or st.proactive[0] != next_token:
        return []
    return st.proactive[1:]


def graft(prefix: DraftTree, sub: DraftTree) -> DraftTree:
    """``sub`` hung below the last node of the chain ``prefix`` (the root when the prefix is empty)."""
    c = len(prefix)
    parents = [c - 1 if p < 0 else p + c for p in sub.parents]
    return DraftTree(prefix.tokens + sub.tokens, prefix.parents + parents, prefix.logp + sub.logp, sub.calls)


def _feed(d: DraftSession, st: TreeState, nodes: list[int]) -> torch.Tensor:
    """Forward ``nodes`` (whose ancestors are all cached) with the tree mask; they join the cached slots."""
    parents = st.tree.parents
    mask = node_mask(parents, nodes, st.slots + nodes, st.base, d.model.dtype)
    pos = tree_positions(parents, st.base)[nodes]
    logits, _ = d.forward([st.tree.tokens[i] for i in nodes], pos, mask)
    st.slots.extend(nodes)
    st.greedy.update(zip(nodes, logits.argmax(dim=-1).tolist()))
    return logits
