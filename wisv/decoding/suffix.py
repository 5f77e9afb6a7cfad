"""Suffix drafting (SuffixDecoding, arXiv 2411.04975): a byte-bounded count trie over token sequences proposes the
continuation its sequences most often had after the current context's suffix.  Pure: no model, no clock.

The index (``SuffixCache``) holds sequences by id: the prompt and output so far of the sessions being decoded, and
the committed outputs of finished ones.  It counts every substring of at most ``suffix_decoding_max_tree_depth``
(``D``) tokens: for each sequence and each start ``i``, the path ``seq[i:i + D]`` is walked from the root and each node
on it counts one.  A node's count is thus how often its path occurs in the sequences held (as a window of at most D
tokens), and a child's count over its parent's is the empirical probability of that token after the path.

``propose(context)`` follows arctic-inference's ``SuffixTree.speculate`` (path mode), by vLLM's ``suffix`` parameter
names: for each match length ``m`` (1 .. D - 1, no longer than the context) whose last-``m``-token suffix is in the
trie, it walks down greedily, each step to the child of highest count (ties: the smallest token id), the path's
probability multiplied by the count ratio, while that probability stays >= ``suffix_decoding_min_token_prob`` and
the draft is shorter than ``min(num_speculative_tokens, floor(m * suffix_decoding_max_spec_factor))`` (and the trie's
depth allows); a draft's score is the sum of its tokens' path probabilities, and the best score wins (ties: the longer
match).  No match or no confident continuation: [].

Bounds *(ours)*: ``nbytes`` estimates the memory as ``NODE_BYTES`` per trie node plus ``TOKEN_BYTES`` per token held.
A sequence may hold at most ``max_seq_bytes`` by its worst case (each token adds at most D nodes): the tokens past
that are not indexed (the sequence is cut).  When the whole cache passes ``max_total_bytes``, or holds more than
``suffix_decoding_max_cached_requests`` sequences, the oldest sequences (by when they were added) are dropped until
it fits.  Dropping a sequence takes its counts out again (nodes at count 0 are removed).
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

NODE_BYTES = 120  # estimated bytes of one trie node: the object, its count and its entry in the parent's dict
TOKEN_BYTES = 8  # estimated bytes of one token held in a sequence's list


@dataclass(frozen=True)
class SuffixConfig:
    """Suffix drafting's settings (vLLM's ``suffix_decoding_*`` names where they fit; the bounds are ours)."""

    suffix_decoding_max_tree_depth: int = 24  # longest substring counted and suffix matched, tokens (D)
    suffix_decoding_max_spec_factor: float = 1.0  # a match of m tokens proposes at most m * this many, tokens/token
    suffix_decoding_min_token_prob: float = 0.1  # a draft stops where its path's empirical probability falls below
    suffix_decoding_max_cached_requests: int = 10000  # most sequences held; the oldest go first, sequences
    num_speculative_tokens: int = 16  # most tokens a proposal carries, tokens
    max_seq_bytes: int = 16 << 20  # one sequence's bound (worst case of its nodes and tokens), bytes
    max_total_bytes: int = 256 << 20  # the whole cache's bound (estimate of its nodes and tokens), bytes

    def __post_init__(self) -> None:
        checks = {"suffix_decoding_max_tree_depth >= 2": self.suffix_decoding_max_tree_depth >= 2,
                  "suffix_decoding_max_spec_factor > 0": self.suffix_decoding_max_spec_factor > 0,
                  "0 <= suffix_decoding_min_token_prob <= 1": 0 <= self.suffix_decoding_min_token_prob <= 1,
                  "suffix_decoding_max_cached_requests >= 1": self.suffix_decoding_max_cached_requests >= 1,
                  "num_speculative_tokens >= 1": self.num_speculative_tokens >= 1,
                  "max_seq_bytes >= the cost of one token": self.max_seq_bytes >= self.token_cost,
                  "max_total_bytes >= max_seq_bytes": self.max_total_bytes >= self.max_seq_bytes}
        bad = [what for what, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"suffix drafting needs {'; '.join(bad)} (got {self})")

    @property
    def token_cost(self) -> int:
        """The most bytes one more token of a sequence can add: its D nodes and itself."""
        return self.suffix_decoding_max_tree_depth * NODE_BYTES + TOKEN_BYTES

    @property
    def max_seq_tokens(self) -> int:
        """Most tokens a sequence may hold within ``max_seq_bytes``."""
        return self.max_seq_bytes // self.token_cost


class _Node:
    __slots__ = ("count", "children")

    def __init__(self) -> None:
        self.count = 0  # occurrences of the path from the root to here
        self.children: dict[int, _Node] = {}


class _Seq:
    __slots__ = ("tokens", "ends")

    def __init__(self) -> None:
        self.tokens: list[int] = []  # the tokens indexed
        self.ends: list[_Node] = []  # nodes of the suffixes ending at the last token, shortest first (<= D)


class SuffixCache:
    """Count trie of the substrings (up to D tokens) of the sequences held, bounded in bytes (see the module doc)."""

    def __init__(self, cfg: SuffixConfig | None = None):
        self.cfg = cfg or SuffixConfig()
        self.root = _Node()
        self.seqs: dict[Hashable, _Seq] = {}  # id -> sequence, oldest first
        self.n_nodes = 0  # trie nodes, the root not counted
        self.n_tokens = 0  # tokens held over all sequences

    @property
    def nbytes(self) -> int:
        """Estimated memory of the trie and the sequences, bytes."""
        return self.n_nodes * NODE_BYTES + self.n_tokens * TOKEN_BYTES

    def add(self, seq_id: Hashable, tokens: Sequence[int]) -> None:
        """Hold a new sequence (an id held already is replaced), then keep the bounds."""
        self.drop(seq_id)
        self.seqs[seq_id] = _Seq()
        self.extend(seq_id, tokens)

    def extend(self, seq_id: Hashable, tokens: Sequence[int]) -> None:
        """Append tokens to a held sequence (those past its bound are not indexed), then keep the bounds; an id not
        held (evicted meanwhile) is ignored."""
        s = self.seqs.get(seq_id)
        if s is None:
            return
        depth = self.cfg.suffix_decoding_max_tree_depth
        for t in tokens[: max(0, self.cfg.max_seq_tokens - len(s.tokens))]:
            t = int(t)
            ends = [self._child(self.root, t)] + [self._child(n, t) for n in s.ends[: depth - 1]]
            for n in ends:
                n.count += 1
            s.tokens.append(t)
            s.ends = ends
            self.root.count += 1
            self.n_tokens += 1
        self._bound(keep=seq_id)

    def drop(self, seq_id: Hashable) -> None:
        """Forget a sequence and its counts (nothing when it is not held)."""
        s = self.seqs.pop(seq_id, None)
        if s is None:
            return
        depth = self.cfg.suffix_decoding_max_tree_depth
        for i in range(len(s.tokens)):
            node = self.root
            node.count -= 1
            for t in s.tokens[i:i + depth]:
                child = node.children[t]
                child.count -= 1
                if child.count == 0:
                    del node.children[t]
                    self.n_nodes -= _size(child)
                    break
                node = child
        self.n_tokens -= len(s.tokens)

    def tokens(self, seq_id: Hashable) -> list[int]:
        """The tokens indexed of a held sequence ([] when not held)."""
        s = self.seqs.get(seq_id)
        return list(s.tokens) if s is not None else []

    def count(self, path: Sequence[int]) -> int:
        """Occurrences of ``path`` (at most D tokens) in the sequences held; the root's count for []."""
        node = self._find(path)
        return node.count if node is not None else 0

    def propose(self, context: Sequence[int], k: int | None = None) -> list[int]:
        """The draft after ``context``: up to ``k`` (default and at most ``num_speculative_tokens``) tokens, by the
        best-scoring greedy walk over the match lengths (module doc); [] when nothing matches confidently."""
        cfg = self.cfg
        k = cfg.num_speculative_tokens if k is None else min(k, cfg.num_speculative_tokens)
        best: tuple[float, list[int]] = (0.0, [])
        for m in range(1, min(cfg.suffix_decoding_max_tree_depth - 1, len(context)) + 1):
            node = self._find(context[len(context) - m:])
            if node is None:
                break  # a longer suffix holds this one: it is not there either
            cap = min(k, int(m * cfg.suffix_decoding_max_spec_factor + 1e-6), cfg.suffix_decoding_max_tree_depth - m)
            score, draft = _walk(node, cap, cfg.suffix_decoding_min_token_prob)
            if draft and score >= best[0]:
                best = (score, draft)
        return best[1]

    def _find(self, path: Sequence[int]) -> _Node | None:
        node = self.root
        for t in path:
            node = node.children.get(int(t))
            if node is None:
                return None
        return node

    def _child(self, node: _Node, t: int) -> _Node:
        child = node.children.get(t)
        if child is None:
            child = node.children[t] = _Node()
            self.n_nodes += 1
        return child

    def _bound(self, keep: Hashable) -> None:
        """Drop the oldest sequences (``keep`` last of all) while over the total bound or the sequence count."""
        order = [i for i in self.seqs if i != keep] + ([keep] if keep in self.seqs else [])
        for seq_id in order:
            if self.nbytes <= self.cfg.max_total_bytes and \
                    len(self.seqs) <= self.cfg.suffix_decoding_max_cached_requests:
                return
            self.drop(seq_id)


def _walk(node: _Node, cap: int, min_prob: float) -> tuple[float, list[int]]:
    """Greedy descent from a matched node: (score, tokens) with at most ``cap`` tokens, each the most frequent child
    (ties: the smallest id) while the path's probability stays >= ``min_prob``; the score sums those probabilities."""
    prob, score, out = 1.0, 0.0, []
    while len(out) < cap and node.children:
        t, child = min(node.children.items(), key=lambda kv: (-kv[1].count, kv[0]))
        prob *= child.count / node.count
        if prob < min_prob:
            break
        out.append(t)
        score += prob
        node = child
    return score, out


def _size(node: _Node) -> int:
    """Nodes in the subtree under and including ``node``."""
    return 1 + sum(_size(c) for c in node.children.values())
