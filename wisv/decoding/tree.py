"""Draft trees as pure functions: best-first construction under a token budget, tree attention mask, depth positions,
greedy acceptance of the longest agreeing root path (SpecEdge / SpecExec-style tree drafting).

A tree of ``n`` nodes is ``tokens[n]`` and ``parents[n]``: ``parents[i]`` is the index of node i's parent, or -1 when
i is a child of the *root* (the last committed token).  Nodes are listed in the order of the drafter's calls, so a
parent always comes before its children (acyclic by construction).  Depth counts from the root's children (depth 1).
Target rows of a verification pass: row 0 is the root's prediction, row ``1 + i`` the prediction after node i.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch


@dataclass
class DraftTree:
    """One drafted tree: token ids, parent indices and each node's cumulative drafter log-probability."""

    tokens: list[int] = field(default_factory=list)  # [n] token ids, in the order of the drafter's calls
    parents: list[int] = field(default_factory=list)  # [n] parent index, -1 for children of the root
    logp: list[float] = field(default_factory=list)  # [n] cumulative drafter log-probability from the root
    calls: int = 0  # drafter forwards spent on the tree (the root's forward included)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def depth(self) -> int:
        """The deepest node's depth (0 for an empty tree)."""
        return max(depths(self.parents), default=0)

    def best_leaf(self) -> int:
        """The leaf with the highest cumulative log-probability (SpecEdge's expansion head)."""
        inner = set(self.parents)
        return max((i for i in range(len(self)) if i not in inner), key=lambda i: self.logp[i])


def check_parents(parents: Sequence[int], max_depth: int | None = None) -> None:
    """Raise ValueError unless every parent is -1 or an earlier node (hence acyclic) and depths stay <= max_depth."""
    for i, p in enumerate(parents):
        if not -1 <= int(p) < i:
            raise ValueError(f"node {i} has parent {int(p)}; a parent must be -1 or an earlier node in [0, {i})")
    if max_depth is not None and parents and max(depths(parents)) > max_depth:
        raise ValueError(f"tree depth {max(depths(parents))} exceeds {max_depth}")


def depths(parents: Sequence[int]) -> list[int]:
    """Depth of each node (children of the root: 1); parents must come before their children."""
    out: list[int] = []
    for p in parents:
        out.append(1 if p < 0 else out[p] + 1)
    return out


def path_to(parents: Sequence[int], node: int) -> list[int]:
    """Node indices from the root's child down to ``node`` (empty for node -1)."""
    path = []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


def ancestors(parents: Sequence[int]) -> torch.Tensor:
    """[n, n] bool: entry (i, j) is True when node j is node i or one of its ancestors."""
    n = len(parents)
    anc = torch.zeros(n, n, dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            anc[i] = anc[p]
        anc[i, i] = True
    return anc


def with_root(parents: Sequence[int]) -> list[int]:
    """The parents of the tree with the root as node 0 (a verification pass feeds the root token first)."""
    return [-1] + [int(p) + 1 for p in parents]


def node_mask(parents: Sequence[int], queries: Sequence[int], keys: Sequence[int], prefix_len: int,
              dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Additive 4D attention mask [1, 1, len(queries), prefix_len + len(keys)] for feeding the nodes ``queries``
    after ``prefix_len`` cached positions followed by the nodes ``keys`` (cached or fed now): 0 where a query may
    attend (the whole prefix, its ancestors, itself), the dtype's minimum elsewhere."""
    anc = ancestors(parents)[list(queries)][:, list(keys)]
    allowed = torch.cat([torch.ones(len(queries), prefix_len, dtype=torch.bool), anc], dim=1)
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def tree_positions(parents: Sequence[int], first_pos: int) -> torch.Tensor:
    """Position ids [n] by depth: the root's children at ``first_pos``, their children at ``first_pos + 1``, ..."""
    return torch.tensor([first_pos + d - 1 for d in depths(parents)], dtype=torch.long)


def greedy_path(tokens: Sequence[int], parents: Sequence[int], argmax: Sequence[int]) -> tuple[list[int], int]:
    """Greedy tree acceptance: the longest root path whose every token equals the target's argmax at its parent,
    and the next token (the target's argmax after the path's end).  ``argmax``: [n + 1], row 0 the root's.
    Returns the accepted node indices (root's child first) and the next token."""
    children: dict[int, dict[int, int]] = {}
    for i, (t, p) in enumerate(zip(tokens, parents)):
        children.setdefault(int(p), {}).setdefault(int(t), i)  # a repeated sibling token: the first one
    path, node = [], -1
    while True:
        want = int(argmax[node + 1])
        nxt = children.get(node, {}).get(want)
        if nxt is None:
            return path, want
        path.append(nxt)
        node = nxt


Expand = Callable[["DraftTree", list[int]], torch.Tensor]  # (tree, nodes) -> [m, V] drafter log-probs after each


def build_tree(root_logp: torch.Tensor, expand: Expand, budget: int, width: int = 1, max_depth: int = 64,
               eos_token_id: int | None = None, children: int | None = None) -> DraftTree:
    """Best-first draft tree of up to ``budget`` nodes (SpecExec-like).  Candidates are the children of the root and
    of every expanded node, scored by cumulative log-score (the drafter's log-probabilities, or calibrated ones:
    wisv.decoding.treecal); each drafter call adds the ``width`` best candidates and ``expand`` returns their next-token
    log-scores.  With ``width`` 1 the tree is the ``budget`` best nodes by path score, which maximises the sum of
    its nodes' path scores (the expected accepted length when scores are acceptance probabilities); a chain is the
    special case where one branch dominates.  ``children`` caps the children of one node (1: a chain of the best
    scored tokens).  EOS nodes and nodes at ``max_depth`` get no children."""
    if budget < 0 or width < 1 or (children is not None and children < 1):
        raise ValueError(f"need budget >= 0, width >= 1 and children >= 1, got {budget}, {width}, {children}")
    cap = budget if children is None else children
    tree, heap, tick = DraftTree(calls=1), [], 0
    tick = _push_children(heap, tick, -1, 0.0, root_logp, min(cap, budget))
    while heap and len(tree) < budget:
        new, take = [], min(width, budget - len(tree))
        while heap and len(new) < take:
            neg, _, parent, token = heapq.heappop(heap)
            tree.tokens.append(token)
            tree.parents.append(parent)
            tree.logp.append(-neg)
            new.append(len(tree) - 1)
        grow = [i for i in new if _expandable(tree, i, max_depth, eos_token_id)]
        if len(tree) >= budget or not grow:
            continue
        logps = expand(tree, grow)  # [m, V]
        tree.calls += 1
        for i, row in zip(grow, logps):
            tick = _push_children(heap, tick, i, tree.logp[i], row, min(cap, budget - len(tree)))
    return tree


def _expandable(tree: DraftTree, i: int, max_depth: int, eos_token_id: int | None) -> bool:
    return tree.tokens[i] != eos_token_id and depths(tree.parents)[i] < max_depth


def _push_children(heap: list, tick: int, parent: int, base: float, logp: torch.Tensor, k: int) -> int:
    """Push the ``k`` most probable children of ``parent`` (equal scores: pushed first, popped first); the next tick."""
    vals, ids = torch.topk(logp.float(), min(k, logp.shape[-1]))
    for v, t in zip(vals.tolist(), ids.tolist()):
        heapq.heappush(heap, (-(base + v), tick, parent, t))
        tick += 1
    return tick
