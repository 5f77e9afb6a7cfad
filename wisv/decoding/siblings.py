"""The sibling branch (pure): at each greedy mismatch j of a chain draft, the target's own token t*_j verified beside
the draft token d_j, so that the edge sees where the two branches lead (wisv/head/features.py ``sib_*`` columns).

The tree is the chain as its main branch plus one node per mismatch: node ``K + i`` holds t* at ``positions[i]``
and has the parent of d_j there (the node before j; -1, the root, at j = 0), so it sits at d_j's depth and reads
exactly d_j's context.  The target's argmax at j is only known once the chain is verified, so the siblings are a
second, small pass fed after the chain's cached keys (``VerifySession.verify_siblings``): the chain's rows, and every
decision read from them, are the chain-only pass's own.  The siblings' cache slots follow the chain's, so the
commit's crop to the accepted chain prefix drops them.
"""
from __future__ import annotations

import torch

from wisv.decoding.tree import node_mask, tree_positions, with_root


def sibling_tree(draft: list[int], positions: list[int], target_tokens: list[int]) -> tuple[list[int], list[int]]:
    """The chain ``draft`` [K] with a sibling ``target_tokens[i]`` beside ``draft[positions[i]]``: tokens and parents
    [K + m] (wisv.decoding.tree's layout: -1 is the root)."""
    k = len(draft)
    if len(positions) != len(target_tokens):
        raise ValueError(f"{len(positions)} positions for {len(target_tokens)} sibling tokens")
    if any(not 0 <= j < k for j in positions):
        raise ValueError(f"sibling positions {positions} outside the draft's {k} tokens")
    parents = list(range(-1, k - 1)) + [j - 1 for j in positions]
    return [int(t) for t in draft] + [int(t) for t in target_tokens], parents


def sibling_inputs(draft_len: int, positions: list[int], prefix_len: int,
                   dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Position ids [m] and the additive 4D mask [1, 1, m, prefix_len + 1 + K + m] for feeding the siblings after
    ``prefix_len`` cached positions, the root and the K chain nodes (all cached by the chain's pass)."""
    _, parents = sibling_tree([0] * draft_len, positions, [0] * len(positions))
    rooted = with_root(parents)
    sibs = range(1 + draft_len, len(rooted))  # the siblings' rooted node indices
    mask = node_mask(rooted, sibs, range(len(rooted)), prefix_len, dtype)
    return tree_positions(rooted, prefix_len)[list(sibs)], mask
