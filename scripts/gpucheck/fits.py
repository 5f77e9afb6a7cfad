"""What the timing grid gives (pure): WISP's estimator fitted on it, an eq. 11 profile of this device, and the
measured over the ``a40`` profile's predicted verification time per K."""
from __future__ import annotations

import numpy as np

from wisv.serving.estimator import batch_features, fit_profile
from wisv.timing.calibrate import CallTiming, fit_compute, profile_from_fit
from wisv.timing.compute import ModelDims, verify_flops
from wisv.timing.hardware import HardwareProfile, get_profile
from wisv.timing.roundtime import n_weights, t_verify_s

TEST_FRAC = 0.25  # held-out share of the grid points


def fit_estimator(rows: list[dict], seed: int, n_boot: int = 200) -> dict:
    """WISP's estimator (wisv.serving.estimator) on the grid: coefficients, train and held-out R^2 / MAPE."""
    x = np.stack([batch_features(r["cached"], r["new"], r["block"]) for r in rows])  # [N, 4]
    y = np.array([r["seconds"] for r in rows])  # [N]
    test = np.random.default_rng(seed).random(len(rows)) < TEST_FRAC
    if test.all() or not test.any():
        test = np.arange(len(rows)) % 4 == 0
    prof = fit_profile(x, y, test, n_boot, seed)
    return {"coef": prof.coef, "train": prof.train, "test": prof.test, "points": len(rows),
            "test_points": int(test.sum())}


def single_timings(rows: list[dict], dims: ModelDims) -> list[CallTiming]:
    """The batch-1 points as eq. 11 calls: one verification pass of K + 1 positions after the prefix."""
    return [CallTiming("verify", 1, n_weights(dims), verify_flops(dims, r["prefix"], r["k"]), r["seconds"], r["k"],
                       r["prefix"]) for r in rows if r["batch"] == 1]


def measured_profile(rows: list[dict], dims: ModelDims, name: str, peak_tflops: float, source: str
                     ) -> tuple[HardwareProfile, dict]:
    """An eq. 11 profile (eta and per-call overheads) fitted on the batch-1 points, and how well it fits."""
    fit = fit_compute(single_timings(rows, dims))
    prof = profile_from_fit(fit, peak_tflops, name, source)
    return prof, {"rel_err_median": fit.rel_err_median, "rel_err_p90": fit.rel_err_p90, "n_used": fit.n_used,
                  "n_total": fit.n_total}


def ratio_per_k(rows: list[dict], dims: ModelDims, profile: str = "a40") -> list[dict]:
    """Per K and prefix, batch 1: measured seconds over ``profile``'s eq. 16 prediction."""
    prof = get_profile(profile)
    out = []
    for r in (r for r in rows if r["batch"] == 1):
        pred = t_verify_s(dims, r["prefix"], r["k"], prof)
        out.append({"k": r["k"], "prefix": r["prefix"], "measured_ms": 1e3 * r["seconds"],
                    f"{profile}_ms": 1e3 * pred, "ratio": r["seconds"] / pred})
    return out
