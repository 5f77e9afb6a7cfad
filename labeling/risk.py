"""tau with confidence: Learn-then-Test over a tau grid, with a Clopper-Pearson bound on answer flips (pure).

A judge accepts a mismatch when its repair probability p < tau.  The risk at tau is the fraction of the accepted dev
mismatches (those with an answer to check) whose acceptance turns a right answer wrong (a flip).  A point estimate
of that fraction picks too large a tau where few mismatches are accepted; here tau is the largest grid value whose
one-sided upper confidence bound (Clopper-Pearson, confidence 1 - delta) on the flip rate stays within the budget.
With ``bonferroni`` each tau is tested at delta / (grid size), so that the bound holds for every tau of the grid at
once (Learn-then-Test, Angelopoulos et al. 2021, with a Bonferroni family); without it the bound holds per tau.
A fixed-sequence test is not used: the smallest taus accept few mismatches, so their bounds are the loosest and a
sequence from there would stop at once.  An empty acceptance set has risk 0 by definition.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import beta


@dataclass(frozen=True)
class RiskConfig:
    """The confidence rule for tau."""

    flip_budget: float = 0.01  # the most flips per accepted checkable mismatch allowed (upper bound), a fraction
    delta: float = 0.1  # 1 - confidence of the bound (0.1: an upper 90% bound)
    bonferroni: bool = False  # test each tau at delta / len(grid), so the bound holds over the whole grid at once


def flip_upper_bound(flips: int, n: int, delta: float) -> float:
    """One-sided Clopper-Pearson upper bound (confidence 1 - delta) on a binomial rate from ``flips`` of ``n``
    (1.0 for n = 0: nothing is known)."""
    if n <= 0:
        return 1.0
    if flips >= n:
        return 1.0
    return float(beta.ppf(1 - delta, flips + 1, n - flips))


def ltt_sweep(p: np.ndarray, flips: np.ndarray, checkable: np.ndarray, taus: list[float],
              cfg: RiskConfig) -> pd.DataFrame:
    """Per tau (ascending): accepted checkable mismatches, flips among them, the point rate, its upper bound and
    whether the bound is within the budget.  p, flips, checkable: [n] per dev mismatch."""
    p = np.asarray(p, float)
    flips, checkable = np.asarray(flips, bool), np.asarray(checkable, bool)
    delta = cfg.delta / len(taus) if cfg.bonferroni and len(taus) else cfg.delta
    rows = []
    for tau in sorted(taus):
        acc = (p < tau) & checkable
        n, k = int(acc.sum()), int((acc & flips).sum())
        ub = flip_upper_bound(k, n, delta) if n else 0.0
        rows.append({"tau": tau, "accepted_checkable": n, "flips": k, "flip_rate": k / n if n else 0.0,
                     "flip_upper": ub, "passes": ub <= cfg.flip_budget})
    return pd.DataFrame(rows)


def ltt_tau(sweep: pd.DataFrame) -> float:
    """The largest tau whose bound is within the budget (0.0: none is, the judge is greedy SD)."""
    ok = sweep[sweep["passes"]]
    return float(ok["tau"].max()) if len(ok) else 0.0
