"""Stage 3 (relabel): CSI-aware budgeted relabeling of the base labels (SPEC eqs. 28-31), and the no-CSI ablation.

Pure functions, per episode (the mismatches of one prompt, in token order):

* eq. 28, smoothed importance: ``s_j = max_k y_k exp(-lam |j - k|)`` over the episode's mismatches ``k``
  (``j``, ``k`` are token positions).  With binary ``y`` a critical mismatch has ``s_j = 1``; a
  harmless one gets the decayed influence of its nearest critical neighbour.
* the repair candidates: ``u_j = 1[s_j >= support_min]``.  Our choice where SPEC and paper are silent:
  with ``support_min = 1`` the candidates are exactly the critical mismatches and eq. 29's constraint
  is the SPEC's ``a_j <= y_j``; but then eq. 28 changes nothing (every candidate has ``s_j = 1``).  A
  ``support_min < 1`` also lets the close neighbours of a critical mismatch be repaired on good links,
  and eq. 29's objective ``sum_j s_j a_j`` then decides what a small budget keeps: critical mismatches
  first, their neighbours after.  Relabeling stays one-way (``a_j <= u_j``): a mismatch far from every
  critical one is never a repair target.
* channel quality ``q(c)`` in (0, 1]: ``channel.csi.CSI.quality``.
* budget ``B(q) = n_cand * (budget_min + (1 - budget_min) * q ** budget_gamma)``: the number of repairs
  (rejections) an episode may keep; monotone increasing in q, every candidate on the ideal link.
* eq. 30, Lagrangian: ``a_j = 1`` iff ``u_j = 1`` and ``s_j > mu(q)``.
* eq. 31, entropy-regularised policy: ``P(a_j = 1) = u_j * sigmoid((s_j - mu(q)) / T)``.
* ``mu(q)`` is the multiplier at which the *expected* number of repairs of eq. 31 equals ``B(q)``
  (bisection); it rises as q falls, so poor links relax the least important candidates first.

The stage samples ``m_csi`` CSI realisations per episode (rates log-uniform, RTT and PER uniform, in
configured ranges), draws ``a`` from eq. 31 for each, and writes ``instances_csi.npz``.  The no-CSI
ablation, ``instances_nocsi.npz``, keeps the base labels ``a = y`` with one constant CSI.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from channel.csi import CSI
from labeling.config import RelabelConfig
from labeling.store import INSTANCES, LABELS, require, save_config, stage_path

LABEL = "harmful"  # the base label y of labels.csv (labeling/harm.py); "critical" below means y = 1


def smoothed_importance(positions: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """Eq. 28 for one episode: positions [n] (tokens), y [n] in {0, 1} -> s [n] in [0, 1]."""
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    crit = positions[y.astype(bool)]
    if len(crit) == 0:
        return np.zeros(len(positions))
    dist = np.abs(positions[:, None] - crit[None, :])  # [n, n_crit]
    return np.exp(-lam * dist).max(axis=1)


def candidates(s: np.ndarray, support_min: float) -> np.ndarray:
    """u_j = 1[s_j >= support_min]: the mismatches relabeling may keep as repairs (int [n])."""
    if not 0 < support_min <= 1:
        raise ValueError(f"support_min must be in (0, 1], got {support_min}")
    return (s >= support_min - 1e-12).astype(np.int64)


def budget(q: float, n_cand: int, budget_min: float, gamma: float = 1.0) -> float:
    """B(q): repairs allowed in an episode with n_cand repair candidates at channel quality q."""
    if not 0 <= q <= 1 or not 0 <= budget_min <= 1 or gamma <= 0:
        raise ValueError(f"need q, budget_min in [0, 1] and gamma > 0; got {q}, {budget_min}, {gamma}")
    return n_cand * (budget_min + (1 - budget_min) * q ** gamma)


def repair_probs(s: np.ndarray, u: np.ndarray, mu: float, temperature: float) -> np.ndarray:
    """Eq. 31: P(a_j = 1) = u_j * sigmoid((s_j - mu) / T) for repair candidates u (the critical y in SPEC)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    x = np.clip((s - mu) / temperature, -60, 60)
    return u * (1 / (1 + np.exp(-x)))


def lagrangian_actions(s: np.ndarray, u: np.ndarray, mu: float) -> np.ndarray:
    """Eq. 30: a_j = 1 iff u_j = 1 and s_j > mu."""
    return ((u == 1) & (s > mu)).astype(np.int64)


def solve_mu(s: np.ndarray, u: np.ndarray, b: float, temperature: float, iters: int = 60) -> float:
    """mu at which sum_j P(a_j = 1) (eq. 31) equals the budget b (clipped to [0, n_cand])."""
    n_cand = float(u.sum())
    if n_cand == 0:
        return 0.0
    b = min(max(b, 0.0), n_cand)
    lo, hi = float(s.min()) - 40 * temperature, float(s.max()) + 40 * temperature
    for _ in range(iters):  # expected repairs decrease in mu
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if repair_probs(s, u, mid, temperature).sum() > b else (lo, mid)
    return (lo + hi) / 2


def sample_csi(rng: np.random.Generator, cfg: RelabelConfig) -> CSI:
    """One CSI realisation from the configured distribution."""
    lo, hi = (math.log10(r) for r in cfg.rate_mbps)
    up, down = 10 ** rng.uniform(lo, hi, size=2)
    return CSI(up, down, rng.uniform(*cfg.rtt_ms), *rng.uniform(*cfg.per, size=2))


def relabel_episode(positions: np.ndarray, y: np.ndarray, csi: CSI, cfg: RelabelConfig,
                    rng: np.random.Generator) -> dict[str, np.ndarray | float]:
    """Eqs. 28-31 for one episode under one CSI: s, q, B, mu, P(a = 1) and a sampled action per mismatch."""
    s = smoothed_importance(positions, y, cfg.lam)
    u = candidates(s, cfg.support_min)
    q = csi.quality()
    b = budget(q, int(u.sum()), cfg.budget_min, cfg.budget_gamma)
    mu = solve_mu(s, u, b, cfg.temperature)
    p = repair_probs(s, u, mu, cfg.temperature)
    return {"s": s, "u": u, "q": q, "budget": b, "mu": mu, "p": p, "a": (rng.random(len(y)) < p).astype(np.int64)}


def relabel(labels: pd.DataFrame, cfg: RelabelConfig) -> dict[str, np.ndarray]:
    """CSI-aware instances: m_csi realisations per episode, one instance per (mismatch, realisation)."""
    rng = np.random.default_rng(cfg.seed)
    cols: dict[str, list] = {k: [] for k in ("row", "csi", "q", "s", "u", "y", "p", "a", "mu")}
    for _, ep in labels.sort_values(["episode", "position"]).groupby("episode"):
        pos, y = ep["position"].to_numpy(), ep[LABEL].to_numpy()
        for _ in range(cfg.m_csi):
            c = sample_csi(rng, cfg)
            r = relabel_episode(pos, y, c, cfg, rng)
            n = len(y)
            cols["row"].append(ep["row"].to_numpy())
            cols["csi"].append(np.repeat(c.features()[None], n, 0))
            cols["y"].append(y)
            for k in ("s", "u", "p", "a"):
                cols[k].append(r[k])
            cols["q"].append(np.full(n, r["q"]))
            cols["mu"].append(np.full(n, r["mu"]))
    return {k: np.concatenate(v) for k, v in cols.items()}


def no_csi_instances(labels: pd.DataFrame, cfg: RelabelConfig) -> dict[str, np.ndarray]:
    """The ablation: base labels a = y, every instance with the same constant CSI."""
    c = CSI.symmetric(cfg.no_csi_rate_mbps, cfg.no_csi_rtt_ms)
    n, y = len(labels), labels[LABEL].to_numpy()
    return {"row": labels["row"].to_numpy(), "csi": np.repeat(c.features()[None], n, 0), "q": np.full(n, c.quality()),
            "s": y.astype(float), "u": y, "y": y, "p": y.astype(float), "a": y, "mu": np.zeros(n)}


def run(cfg: RelabelConfig) -> dict[str, dict[str, np.ndarray]]:
    """Write instances_csi.npz and instances_nocsi.npz from labels.csv."""
    labels = pd.read_csv(require(cfg.run_dir, LABELS, "label"))
    out = {"csi": relabel(labels, cfg), "nocsi": no_csi_instances(labels, cfg)}
    for variant, arrays in out.items():
        np.savez_compressed(stage_path(cfg.run_dir, INSTANCES, variant=variant), **arrays)
    csi = out["csi"]
    crit = csi["y"] == 1
    nbr = (csi["u"] == 1) & ~crit
    lo, hi = csi["q"] < 0.4, csi["q"] > 0.8
    save_config(cfg.run_dir, "relabel", cfg, {"instances": int(len(csi["a"])), "repair_rate": float(csi["a"].mean())})
    print(f"relabel: {len(csi['a'])} CSI-aware instances ({cfg.m_csi} CSI per episode), repair rate "
          f"{csi['a'].mean():.3f}, candidates {csi['u'].mean():.3f} of mismatches\n"
          f"  kept as repair       q < 0.4   q > 0.8\n"
          f"  critical             {_mean(csi['a'][crit & lo])}     {_mean(csi['a'][crit & hi])}\n"
          f"  critical neighbours  {_mean(csi['a'][nbr & lo])}     {_mean(csi['a'][nbr & hi])}\n"
          f"  no-CSI ablation: {len(out['nocsi']['a'])} instances (a = y)")
    return out


def _mean(x: np.ndarray) -> str:
    return f"{x.mean():.3f}" if len(x) else "n/a"
