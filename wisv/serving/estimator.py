"""WISP verification-time estimator (SPEC WISP eq. 19): batch features, OLS fit, bootstrap CIs, fit metrics.

``T_batch = a * N_linear + b_compute * N_interactions + b_read * N_cached + d_seq * N_seq + c`` with, over the
forward passes of a batch, ``N_linear = sum L_new``, ``N_interactions = sum (L_cached + L_new) * L_new``,
``N_cached = sum L_cached`` and ``N_seq`` the batch's requests.  ``d_seq`` is not in the SPEC: it is the engine's
per-sequence host work (one KV cache per session, gathered and scattered each pass), which the first GPU check
found to dominate on an H200 (28 ms at batch 1, 90-151 ms at batch 32, whatever K; results/gpu/README.md).  A
profile saved before the term loads with ``d_seq`` = 0.

The sums run over what the engine (wisv/serving/batchverify.py) actually computes.  Without ``block`` (or for a
batch of one, which is a single pass) that is the SPEC's per-request sum.  With ``block`` (each request's
K + 1 positions that go through the batched pass), a batch of several requests is counted as the engine
runs it: each uncached tail beyond those positions (a cold prompt) is a pass of its own, and the batched
pass is a padded rectangle, every row ``max(block)`` new tokens over ``max(cached)`` cache entries.  Padding
is real work on a padded engine (and is where mixing long and short blocks costs, WISP's verification
interference), so counting it is what lets one set of coefficients fit both paths.  Pure functions; the
profiling that produces (features, seconds) pairs lives in testbed/profile.py.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

COEFS = ("a", "b_compute", "b_read", "d_seq", "c")
ADDED_COEFS = ("d_seq",)  # coefficients a profile saved before them may lack (read as 0)


def batch_features(cached: list[int], new: list[int], block: list[int] | None = None) -> np.ndarray:
    """[N_linear, N_interactions, N_cached, N_seq, 1] of one batch: per-request cached and new token counts, and
    optionally the positions of each request that the batched pass feeds (``block``, <= new)."""
    if len(cached) != len(new) or not new or (block is not None and len(block) != len(new)):
        raise ValueError("need one (cached, new[, block]) per request, at least one request")
    if min(cached) < 0 or min(new) < 1:
        raise ValueError("cached must be >= 0 and new >= 1")
    c, n = np.asarray(cached, float), np.asarray(new, float)
    if block is None or len(new) == 1:
        return np.array([n.sum(), ((c + n) * n).sum(), c.sum(), float(len(new)), 1.0])
    b = np.asarray(block, float)
    if b.min() < 1 or np.any(b > n):
        raise ValueError("block must be in 1..new for every request")
    tail = n - b  # uncached positions beyond the block: prefilled alone, one pass per request that has them
    rows, big_c, big_n = len(new), float((c + tail).max()), float(b.max())  # the padded batched pass
    prefill = np.array([tail.sum(), ((c + tail) * tail).sum(), (c * (tail > 0)).sum()])
    batched = np.array([rows * big_n, rows * big_n * (big_c + big_n), rows * big_c])
    return np.append(prefill + batched, [float(rows), 1.0])


def fit_ols(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares coefficients for x [N, 5] (features with the constant column), y [N] seconds; where columns are
    collinear (every batch of one size: N_seq is a constant), the minimum-norm solution, which predicts the same."""
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return coef


def bootstrap_ci(x: np.ndarray, y: np.ndarray, n_boot: int = 200, alpha: float = 0.05,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap (resampling batches) confidence intervals of the coefficients: (lo [5], hi [5])."""
    rng = np.random.default_rng(seed)
    boots = np.stack([fit_ols(x[idx], y[idx]) for idx in (rng.integers(0, len(y), len(y)) for _ in range(n_boot))])
    return np.quantile(boots, alpha / 2, axis=0), np.quantile(boots, 1 - alpha / 2, axis=0)


def fit_metrics(y: np.ndarray, y_hat: np.ndarray) -> dict[str, float]:
    """R^2, mean absolute error (s) and mean absolute percentage error (%)."""
    ss_res, ss_tot = float(((y - y_hat) ** 2).sum()), float(((y - y.mean()) ** 2).sum())
    return {"r2": 1 - ss_res / ss_tot if ss_tot > 0 else float("nan"), "mae_s": float(np.abs(y - y_hat).mean()),
            "mape_pct": float(100 * np.abs((y - y_hat) / y).mean())}


@dataclass
class EstimatorProfile:
    """Fitted coefficients (seconds per unit), their CIs and fit quality; what the scheduler loads."""

    coef: dict[str, float]  # a, b_compute, b_read, d_seq, c (seconds per feature unit)
    ci_lo: dict[str, float] = field(default_factory=dict)
    ci_hi: dict[str, float] = field(default_factory=dict)
    train: dict[str, float] = field(default_factory=dict)  # r2, mae_s, mape_pct on the training batches
    test: dict[str, float] = field(default_factory=dict)  # the same on held-out batches
    meta: dict = field(default_factory=dict)  # device, model, batch counts

    def __post_init__(self) -> None:
        missing = set(COEFS) - set(self.coef)
        if set(self.coef) - set(COEFS) or missing - set(ADDED_COEFS):
            raise ValueError(f"coefficients {sorted(self.coef)}, expected {list(COEFS)}")
        self.coef = {k: float(self.coef.get(k, 0.0)) for k in COEFS}  # saved before a term: its fit had none

    def coef_vector(self) -> np.ndarray:
        """The coefficients in feature order (a, b_compute, b_read, d_seq, c)."""
        return np.array([self.coef[k] for k in COEFS])

    def predict_s(self, cached: list[int], new: list[int], block: list[int] | None = None) -> float:
        """Estimated verification time of one batch, seconds (``block`` as in batch_features)."""
        return float(batch_features(cached, new, block) @ self.coef_vector())

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(asdict(self), indent=1))
        return p

    @classmethod
    def load(cls, path: str | Path) -> EstimatorProfile:
        try:
            d = json.loads(Path(path).read_text())
            return cls(**d)
        except (OSError, json.JSONDecodeError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"{path}: not an estimator profile ({e}); run python -m testbed.profile") from e


PRIOR_POINTS_S = (0.005, 0.040)  # profile predictions at which the prior pins measured = predicted (s = 1, o = 0)
_PRIOR_XX, _PRIOR_X = sum(x * x for x in PRIOR_POINTS_S), sum(PRIOR_POINTS_S)  # its sums (measured = predicted)


@dataclass(frozen=True)
class LiveFit:
    """Online affine correction of the profile: ``measured ~ scale * predicted + offset_s``.

    A profile timed on an idle, hot machine misses what the live edge pays: a fixed part per batch
    (wake-ups, the serving loop, contention with the UEs' processes; ~4 ms a batch here against the profile's
    1 ms) and a proportional part.  A ratio alone (measured / predicted) cannot hold both: fitted on small
    batches it inflates every large batch's estimate, so the deadline test keeps batches small, whose large
    ratios keep it so.  This fits both by exponentially weighted least squares (each batch's weight decays by
    ``decay`` per batch) over the decayed sums below, plus two fixed pseudo-batches of weight ``prior_weight`` at
    PRIOR_POINTS_S on measured = predicted, which start it at the profile and keep it determined when every
    batch has the same size.  The online part of WISP's estimator."""

    sxx: float = 0.0  # decayed sums over batches of predicted^2, predicted, 1, predicted*measured, measured
    sx: float = 0.0
    n: float = 0.0
    sxy: float = 0.0
    sy: float = 0.0
    scale: float = 1.0
    offset_s: float = 0.0

    def predict(self, predicted_s: float) -> float:
        """Corrected estimate, seconds (never below a quarter of the profile's)."""
        return max(self.scale * predicted_s + self.offset_s, 0.25 * predicted_s)


def live_update(fit: LiveFit, predicted_s: float, measured_s: float, decay: float = 0.95,
                prior_weight: float = 0.2, scale_bounds: tuple[float, float] = (0.25, 4.0),
                offset_bounds_s: tuple[float, float] = (-0.05, 0.05)) -> LiveFit:
    """One batch's step of the online correction (see LiveFit); a batch with no prediction or time is skipped."""
    if predicted_s <= 0 or measured_s <= 0:
        return fit
    x, y = predicted_s, measured_s
    sums = [decay * v + d for v, d in zip((fit.sxx, fit.sx, fit.n, fit.sxy, fit.sy), (x * x, x, 1.0, x * y, y))]
    sxx, sx, n, sxy, sy = sums
    pxx, px, pn = prior_weight * _PRIOR_XX, prior_weight * _PRIOR_X, prior_weight * len(PRIOR_POINTS_S)
    a = np.array([[sxx + pxx, sx + px], [sx + px, n + pn]])
    b = np.array([sxy + pxx, sy + px])
    scale, offset = np.linalg.solve(a, b)
    return LiveFit(sxx, sx, n, sxy, sy, float(np.clip(scale, *scale_bounds)), float(np.clip(offset, *offset_bounds_s)))


def fit_profile(x: np.ndarray, y: np.ndarray, test_mask: np.ndarray, n_boot: int = 200, seed: int = 0,
                meta: dict | None = None) -> EstimatorProfile:
    """Fit on the training rows, bootstrap CIs, and report train and held-out metrics."""
    tr = ~test_mask
    coef = fit_ols(x[tr], y[tr])
    lo, hi = bootstrap_ci(x[tr], y[tr], n_boot, seed=seed)
    named = lambda v: {k: float(c) for k, c in zip(COEFS, v)}  # noqa: E731
    return EstimatorProfile(named(coef), named(lo), named(hi), fit_metrics(y[tr], x[tr] @ coef),
                            fit_metrics(y[test_mask], x[test_mask] @ coef) if test_mask.any() else {}, meta or {})
