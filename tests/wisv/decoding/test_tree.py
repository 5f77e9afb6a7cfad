"""Pure draft-tree functions: parents and depths, masks and positions, greedy path acceptance, best-first building."""
import pytest
import torch

from wisv.decoding.tree import (
    DraftTree,
    ancestors,
    build_tree,
    check_parents,
    depths,
    greedy_path,
    node_mask,
    path_to,
    tree_positions,
    with_root,
)

# root -> 0 (a), 1 (b); 0 -> 2 (c); 1 -> 3 (d), 4 (e); 4 -> 5 (f)
PARENTS = [-1, -1, 0, 1, 1, 4]
TOKENS = [10, 11, 12, 13, 14, 15]


def test_depths_paths_and_ancestors():
    assert depths(PARENTS) == [1, 1, 2, 2, 2, 3]
    assert path_to(PARENTS, 5) == [1, 4, 5]
    assert path_to(PARENTS, -1) == []
    anc = ancestors(PARENTS)
    assert anc[5].nonzero().flatten().tolist() == [1, 4, 5]
    assert anc[2].nonzero().flatten().tolist() == [0, 2]
    assert with_root(PARENTS) == [-1, 0, 0, 1, 2, 2, 5]


@pytest.mark.parametrize("parents", [[0], [-1, 1], [-1, 2, 0], [-2], [-1, 0, 5]])
def test_check_parents_refuses_self_forward_and_out_of_range(parents):
    with pytest.raises(ValueError):
        check_parents(parents)


def test_check_parents_depth_bound():
    check_parents(PARENTS, max_depth=3)
    with pytest.raises(ValueError, match="depth"):
        check_parents(PARENTS, max_depth=2)


def test_node_mask_lets_each_node_see_the_prefix_its_ancestors_and_itself():
    m = node_mask(PARENTS, range(6), range(6), prefix_len=3)
    assert m.shape == (1, 1, 6, 9)
    seen = (m[0, 0] == 0)
    assert seen[:, :3].all()
    assert seen[5, 3:].nonzero().flatten().tolist() == [1, 4, 5]
    assert seen[3, 3:].nonzero().flatten().tolist() == [1, 3]
    assert (m[0, 0][~seen] == torch.finfo(torch.float32).min).all()
    sub = node_mask(PARENTS, [5], [0, 1, 4, 5], prefix_len=2)  # a drafter call: cached nodes then the new one
    assert (sub[0, 0, 0] == 0).tolist() == [True, True, False, True, True, True]


def test_positions_by_depth():
    assert tree_positions(PARENTS, 7).tolist() == [7, 7, 8, 8, 8, 9]
    assert tree_positions(with_root(PARENTS), 6).tolist() == [6, 7, 7, 8, 8, 8, 9]


def test_greedy_path_takes_a_deep_non_first_branch():
    # target argmax rows: root -> 11 (node 1), after node 1 -> 14 (node 4), after node 4 -> 15 (node 5), then 99
    argmax = [11, 0, 14, 0, 0, 15, 99]
    assert greedy_path(TOKENS, PARENTS, argmax) == ([1, 4, 5], 99)
    assert greedy_path(TOKENS, PARENTS, [42] + [0] * 6) == ([], 42)  # nothing agrees: the correction only
    assert greedy_path(TOKENS, PARENTS, [10, 7, 0, 0, 0, 0, 0]) == ([0], 7)


def _fake_expand(table):
    """A drafter whose next-token distribution depends on the node's token only."""
    def expand(tree: DraftTree, nodes: list[int]) -> torch.Tensor:
        return torch.stack([table[tree.tokens[i]] for i in nodes])
    return expand


def _dist(probs: dict[int, float], v: int = 8) -> torch.Tensor:
    """Log-probabilities with the given mass on some tokens and the rest on token 0."""
    p = torch.zeros(v, dtype=torch.float64)
    for t, q in probs.items():
        p[t] = q
    p[0] = 1 - p.sum()
    return p.clamp_min(1e-30).log()


def test_build_tree_expands_the_most_probable_candidates_first():
    root = _dist({1: 0.5, 2: 0.4})
    table = {1: _dist({3: 0.9}), 2: _dist({4: 0.9}), 3: _dist({5: 0.5, 6: 0.5}), 4: _dist({7: 0.9}),
             5: _dist({1: 1.0}), 6: _dist({1: 1.0}), 7: _dist({1: 1.0})}
    tree = build_tree(root, _fake_expand(table), budget=5)
    assert tree.tokens == [1, 3, 2, 4, 7]  # 0.5, 0.45, 0.4, 0.36, 0.324 beat 3's children (0.225) and 0 (0.1)
    assert tree.parents == [-1, 0, -1, 2, 3]
    assert tree.calls == 5  # the root's forward and one per node but the last
    check_parents(tree.parents)
    assert tree.best_leaf() == 1  # leaves: node 1 (0.45) and node 4 (0.324)


def test_build_tree_budget_width_depth_and_eos():
    root = _dist({1: 0.6, 2: 0.4})
    table = {t: _dist({1: 0.6, 2: 0.4}) for t in range(8)}
    for budget, width in [(1, 1), (7, 1), (16, 4), (9, 3)]:
        tree = build_tree(root, _fake_expand(table), budget=budget, width=width)
        assert len(tree) == budget
        check_parents(tree.parents)
    assert build_tree(root, _fake_expand(table), budget=16, width=4).calls == 4
    deep = build_tree(root, _fake_expand(table), budget=12, max_depth=2)
    assert deep.depth == 2 and len(deep) == 12  # below depth 2 nothing grows: improbable root children fill the rest
    assert deep.tokens[:6] == [1, 2, 1, 2, 1, 2] and depths(deep.parents)[:6] == [1, 1, 2, 2, 2, 2]
    eos = build_tree(root, _fake_expand(table), budget=4, eos_token_id=1)
    assert all(eos.tokens[p] != 1 for p in eos.parents if p >= 0)  # EOS nodes get no children
    assert len(build_tree(root, _fake_expand(table), budget=0)) == 0


def test_build_tree_children_cap_gives_a_chain_of_the_best_tokens():
    root = _dist({1: 0.5, 2: 0.4})
    table = {1: _dist({3: 0.9}), 2: _dist({4: 0.9}), 3: _dist({5: 0.5, 6: 0.4}), 4: _dist({7: 0.9}),
             5: _dist({2: 0.6}), 6: _dist({1: 1.0}), 7: _dist({1: 1.0})}
    chain = build_tree(root, _fake_expand(table), budget=5, children=1)
    assert chain.tokens == [1, 3, 5, 2, 4] and chain.parents == [-1, 0, 1, 2, 3]  # the argmax at every step
    capped = build_tree(root, _fake_expand(table), budget=6, children=2)
    assert max(capped.parents.count(p) for p in set(capped.parents)) == 2
    with pytest.raises(ValueError):
        build_tree(root, _fake_expand(table), budget=4, children=0)
