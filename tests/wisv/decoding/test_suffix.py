"""Suffix drafting's index (wisv/decoding/suffix.py): hand-built proposals, its bounds, dropping, and ``propose``
against a brute-force reference that scans the sequences directly."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wisv.decoding.suffix import NODE_BYTES, TOKEN_BYTES, SuffixCache, SuffixConfig


def cache_of(*seqs: list[int], **cfg) -> SuffixCache:
    c = SuffixCache(SuffixConfig(**cfg))
    for i, s in enumerate(seqs):
        c.add(i, s)
    return c


def test_repeated_text_proposes_its_continuation() -> None:
    assert cache_of([1, 2, 3, 4, 5]).propose([9, 1, 2]) == [3, 4]  # a match of m tokens proposes at most m
    wide = cache_of([1, 2, 3, 4, 5], suffix_decoding_max_spec_factor=2.0)
    assert wide.propose([9, 1, 2]) == [3, 4, 5]  # the sequence ends after 5
    assert wide.propose([9, 1, 2], k=2) == [3, 4]  # k caps it
    assert cache_of([1, 2, 3]).propose([7, 8]) == []  # nothing matches
    assert cache_of([1, 2, 3]).propose([]) == []


def test_the_most_frequent_continuation_wins_and_the_probability_threshold_stops_it() -> None:
    seqs = ([1, 2, 3], [1, 2, 4], [1, 2, 4])
    assert cache_of(*seqs).propose([1, 2]) == [4]  # 2 of 3
    assert cache_of(*seqs, suffix_decoding_min_token_prob=0.7).propose([1, 2]) == []  # 2/3 < 0.7
    # the path's probability is the product: [5, 6] then 7 (1/2) then 8 (1/2 * 1) then 9 (1/2 * 1/2 = 1/4)
    c = cache_of([5, 6, 7, 8, 9], [5, 6, 7, 8, 1], [5, 6, 0], suffix_decoding_max_spec_factor=4.0)
    assert c.count([5, 6, 7]) == 2 and c.count([5, 6]) == 3
    assert c.propose([5, 6]) == [7, 8, 1]  # 2/3, 2/3, then 1 vs 9 tie (1/3 each, smallest id)
    assert cache_of([5, 6, 7, 8, 9], [5, 6, 7, 8, 1], [5, 6, 0], suffix_decoding_max_spec_factor=4.0,
                    suffix_decoding_min_token_prob=0.5).propose([5, 6]) == [7, 8]


def test_ties_break_to_the_smallest_token_whatever_the_order_added() -> None:
    assert cache_of([1, 5], [1, 3]).propose([1]) == [3]
    assert cache_of([1, 3], [1, 5]).propose([1]) == [3]


def _nodes(c: SuffixCache) -> int:
    stack, n = [c.root], -1
    while stack:
        node = stack.pop()
        n += 1
        stack += node.children.values()
    return n


def test_the_total_bound_holds_under_many_adds_by_dropping_the_oldest() -> None:
    cfg = dict(suffix_decoding_max_tree_depth=4, max_seq_bytes=4000, max_total_bytes=6000)
    c = SuffixCache(SuffixConfig(**cfg))
    for i in range(60):
        c.add(i, [(i * 7 + j * 3) % 11 for j in range(8)])
        assert c.nbytes <= 6000 and i in c.seqs and c.n_nodes == _nodes(c)
        assert c.nbytes == c.n_nodes * NODE_BYTES + c.n_tokens * TOKEN_BYTES
        assert list(c.seqs) == sorted(c.seqs)  # the oldest went first
    assert len(c.seqs) < 60


def test_a_sequence_over_its_own_bound_is_cut_and_the_count_bound_holds() -> None:
    cfg = SuffixConfig(suffix_decoding_max_tree_depth=3, max_seq_bytes=5 * SuffixConfig(
        suffix_decoding_max_tree_depth=3).token_cost, suffix_decoding_max_cached_requests=3)
    c = SuffixCache(cfg)
    c.add("a", list(range(10)))
    c.extend("a", [42])
    assert c.tokens("a") == [0, 1, 2, 3, 4] and c.count([5]) == 0 and c.count([42]) == 0
    for i in range(5):
        c.add(i, [i])
    assert list(c.seqs) == [2, 3, 4] and c.count([0]) == 0
    c.extend("gone", [1, 2])  # evicted or never held: nothing happens
    assert "gone" not in c.seqs


def test_dropping_a_sequence_takes_its_counts_out() -> None:
    alone = cache_of([1, 2, 3, 1, 2, 4])
    c = cache_of([1, 2, 3, 1, 2, 4], [2, 3, 9, 1, 2, 3])
    assert c.propose([1, 2]) == [3, 1]
    c.drop(1)
    assert _shape(c.root) == _shape(alone.root) and c.n_nodes == alone.n_nodes == _nodes(c)
    assert c.propose([1, 2]) == alone.propose([1, 2])
    c.drop(0)
    c.drop(0)
    assert c.nbytes == 0 and c.root.count == 0 and not c.root.children


def _shape(node) -> tuple:
    return node.count, tuple(sorted((t, _shape(n)) for t, n in node.children.items()))


@pytest.mark.parametrize("bad", [dict(suffix_decoding_max_tree_depth=1), dict(suffix_decoding_max_spec_factor=0),
                                 dict(suffix_decoding_min_token_prob=1.5), dict(num_speculative_tokens=0),
                                 dict(suffix_decoding_max_cached_requests=0), dict(max_seq_bytes=10),
                                 dict(max_seq_bytes=2 << 20, max_total_bytes=1 << 20)])
def test_bad_settings_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError, match="suffix drafting needs"):
        SuffixConfig(**bad)


def ref_count(seqs: list[list[int]], path: list[int]) -> int:
    n = len(path)
    return sum(s[i:i + n] == path for s in seqs for i in range(len(s) - n + 1))


def ref_propose(seqs: list[list[int]], ctx: list[int], cfg: SuffixConfig, k: int) -> list[int]:
    """The rule of the module doc, by scanning the sequences for every count."""
    depth, best = cfg.suffix_decoding_max_tree_depth, (0.0, [])
    for m in range(1, min(depth - 1, len(ctx)) + 1):
        path = ctx[len(ctx) - m:]
        if ref_count(seqs, path) == 0:
            break
        cap = min(k, cfg.num_speculative_tokens, int(m * cfg.suffix_decoding_max_spec_factor + 1e-6), depth - m)
        prob, score, out = 1.0, 0.0, []
        while len(out) < cap:
            here = path + out
            nexts = {s[i + len(here)] for s in seqs for i in range(len(s) - len(here))
                     if s[i:i + len(here)] == here}
            if not nexts:
                break
            t = min(nexts, key=lambda t: (-ref_count(seqs, here + [t]), t))
            prob *= ref_count(seqs, here + [t]) / ref_count(seqs, here)
            if prob < cfg.suffix_decoding_min_token_prob:
                break
            out.append(t)
            score += prob
        if out and score >= best[0]:
            best = (score, out)
    return best[1]


tokens = st.lists(st.integers(0, 4), max_size=14)


@settings(max_examples=150, deadline=None)
@given(seqs=st.lists(tokens, min_size=1, max_size=4), pieces=st.lists(tokens, max_size=3),
       contexts=st.lists(tokens, min_size=1, max_size=4), depth=st.integers(2, 6),
       factor=st.sampled_from([0.5, 1.0, 2.5]), min_prob=st.sampled_from([0.0, 0.2, 0.5]),
       k=st.integers(1, 6), dropped=st.integers(-1, 3))
def test_propose_equals_the_brute_force_reference(seqs, pieces, contexts, depth, factor, min_prob, k, dropped):
    cfg = SuffixConfig(suffix_decoding_max_tree_depth=depth, suffix_decoding_max_spec_factor=factor,
                       suffix_decoding_min_token_prob=min_prob, num_speculative_tokens=5)
    c = SuffixCache(cfg)
    for i, s in enumerate(seqs):
        c.add(i, s)
    held = [list(s) for s in seqs]
    for p in pieces:  # the last sequence grows, as a session's output does
        c.extend(len(seqs) - 1, p)
        held[-1] += p
    if 0 <= dropped < len(seqs):
        c.drop(dropped)
        held[dropped] = []
    assert c.n_nodes == _nodes(c) and c.root.count == sum(map(len, held))
    for ctx in contexts:
        assert c.propose(ctx, k) == ref_propose(held, ctx, cfg, k), ctx
        for m in range(1, min(depth, len(ctx)) + 1):
            assert c.count(ctx[-m:]) == ref_count(held, ctx[-m:])
