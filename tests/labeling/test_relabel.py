"""Relabeling (eqs. 28-31): hand-computed values, budget and multiplier properties, one-way labels, the ablation."""
import math

import numpy as np
import pandas as pd
import pytest

from channel.csi import CSI
from labeling.config import RelabelConfig
from labeling.relabel import (
    budget,
    candidates,
    lagrangian_actions,
    no_csi_instances,
    relabel,
    relabel_episode,
    repair_probs,
    smoothed_importance,
    solve_mu,
)


def test_smoothed_importance_hand_values():
    s = smoothed_importance(np.array([0, 2, 10]), np.array([0, 1, 0]), lam=0.5)
    assert s == pytest.approx([math.exp(-1), 1.0, math.exp(-4)])
    s2 = smoothed_importance(np.array([0, 3, 5]), np.array([1, 0, 1]), lam=1.0)
    assert s2 == pytest.approx([1.0, math.exp(-2), 1.0])  # the nearer critical neighbour wins (max)
    assert smoothed_importance(np.array([1, 4]), np.array([0, 0]), 0.5).tolist() == [0, 0]
    with pytest.raises(ValueError):
        smoothed_importance(np.array([1]), np.array([1]), -1)


def test_candidates_with_support_one_are_the_critical_mismatches():
    pos, y = np.array([0, 1, 2, 9]), np.array([0, 1, 0, 0])
    s = smoothed_importance(pos, y, 0.5)
    assert candidates(s, 1.0).tolist() == y.tolist()
    assert candidates(s, 0.5).tolist() == [1, 1, 1, 0]  # exp(-0.5) = 0.61 >= 0.5 > exp(-4)
    with pytest.raises(ValueError):
        candidates(s, 0.0)


@pytest.mark.parametrize("q,expected", [(1.0, 10.0), (0.0, 2.0), (0.5, 6.0)])
def test_budget_hand_values(q, expected):
    assert budget(q, 10, budget_min=0.2) == pytest.approx(expected)


def test_budget_is_monotone_in_quality():
    qs = np.linspace(0, 1, 11)
    b = [budget(q, 7, 0.1, gamma=2.0) for q in qs]
    assert all(x < y for x, y in zip(b, b[1:]))
    with pytest.raises(ValueError):
        budget(1.5, 3, 0.1)


def test_repair_probs_hand_values_and_one_way():
    s, u = np.array([1.0, 0.5, 0.9]), np.array([1, 1, 0])
    p = repair_probs(s, u, mu=0.5, temperature=0.25)
    assert p == pytest.approx([1 / (1 + math.exp(-2)), 0.5, 0.0])
    assert lagrangian_actions(s, u, 0.5).tolist() == [1, 0, 0]


def test_mu_meets_the_budget_and_rises_as_the_channel_worsens():
    s = np.array([1.0, 1.0, 0.6, 0.3, 0.1])
    u = np.array([1, 1, 1, 1, 0])
    mus = []
    for q in (0.9, 0.5, 0.1):
        b = budget(q, int(u.sum()), 0.1)
        mu = solve_mu(s, u, b, 0.1)
        assert repair_probs(s, u, mu, 0.1).sum() == pytest.approx(b, abs=1e-6)
        mus.append(mu)
    assert mus[0] < mus[1] < mus[2]
    assert solve_mu(s, np.zeros(5, int), 1.0, 0.1) == 0.0


def test_poor_links_relax_neighbours_before_critical_mismatches():
    cfg = RelabelConfig(lam=0.2, support_min=0.2, temperature=0.05, budget_min=0.3)
    pos, y = np.array([0, 3, 6, 30]), np.array([0, 1, 0, 0])
    rng = np.random.default_rng(0)
    good = relabel_episode(pos, y, CSI.symmetric(1000, 1), cfg, rng)
    poor = relabel_episode(pos, y, CSI.symmetric(1, 100), cfg, rng)
    assert good["u"].tolist() == [1, 1, 1, 0]
    assert good["p"].sum() > poor["p"].sum()
    assert poor["p"][1] > 0.9 > poor["p"][0]  # the critical one is kept, its neighbours relaxed
    assert np.all(poor["a"] <= poor["u"]) and np.all(good["a"] <= good["u"]) and poor["p"][3] == 0


def _labels():
    rows = [(0, 0, 1, 0), (1, 0, 5, 1), (2, 0, 8, 0), (3, 1, 2, 0), (4, 1, 40, 1)]
    return pd.DataFrame(rows, columns=["row", "episode", "position", "harmful"])


def test_relabel_is_seeded_and_one_way():
    cfg = RelabelConfig(m_csi=5, seed=3)
    a, b = relabel(_labels(), cfg), relabel(_labels(), cfg)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert len(a["a"]) == 5 * 5 and a["csi"].shape == (25, 5)
    assert np.all(a["a"] <= a["u"]) and np.all(a["u"] >= a["y"])
    assert np.ptp(a["csi"], axis=0).max() > 0


def test_no_csi_ablation_keeps_base_labels_with_constant_csi():
    inst = no_csi_instances(_labels(), RelabelConfig())
    assert inst["a"].tolist() == [0, 1, 0, 0, 1]
    assert np.ptp(inst["csi"], axis=0).max() == 0
