"""What the timing grid gives (pure): WISP's estimator fitted on it, an eq. 11 profile of this device, and the
measured over the ``a40`` profile's predicted verification time per K."""
from __future__ import annotations

import numpy as np

from wisv.serving.estimator import batch_features, fit_profile
from wisv.timing.calibrate import CallTiming, ComputeFit, fit_compute, profile_from_fit
from wisv.timing.compute import ModelDims, verify_flops
from wisv.timing.hardware import HardwareProfile, get_profile
from wisv.timing.roundtime import n_weights, t_verify_s

TEST_FRAC = 0.25  # held-out share of the grid points


def fit_estimator(rows: list[dict], seed: int, n_boot: int = 200) -> dict:
    """WISP's estimator (wisv.serving.estimator) on the grid: coefficients, train and held-out R^2 / MAPE."""
    x = np.stack([batch_features(r["cached"], r["new"], r["block"]) for r in rows])  # [N, 5]
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
    """An eq. 11 profile (eta and per-call overheads) fitted on the batch-1 points, and how well it fits; when the
    points fix no FLOP rate (a noisy CPU whose time does not grow with K), the line through the fastest and the
    largest point instead."""
    timings = single_timings(rows, dims)
    try:
        fit = fit_compute(timings)
    except ValueError as e:
        fit, why = two_point_fit(timings), f"two-point fit ({e})"
    else:
        why = "eq. 11 fit (wisv.timing.calibrate.fit_compute)"
    prof = profile_from_fit(fit, peak_tflops, name, source)
    return prof, {"method": why, "rel_err_median": fit.rel_err_median, "rel_err_p90": fit.rel_err_p90,
                  "n_used": fit.n_used, "n_total": fit.n_total}


def two_point_fit(timings: list[CallTiming]) -> ComputeFit:
    """The line through the fastest call and the largest (most FLOPs) one: its slope the FLOP rate (the largest
    call alone when it is not slower), its value at zero FLOPs the phase overhead (pure)."""
    fast, big = min(timings, key=lambda t: t.seconds), max(timings, key=lambda t: t.flops)
    slower = big.seconds > fast.seconds and big.flops > fast.flops
    rate = (big.flops - fast.flops) / (big.seconds - fast.seconds) if slower else big.flops / big.seconds
    phase = max(0.0, fast.seconds - fast.flops / rate)
    rel = [abs(phase + t.flops / rate - t.seconds) / t.seconds for t in timings]
    return ComputeFit(phase, 0.0, 0.0, rate, len(timings), len(timings), float(np.median(rel)),
                      float(np.quantile(rel, 0.9)))


def ratio_per_k(rows: list[dict], dims: ModelDims, profile: str = "a40") -> list[dict]:
    """Per K and prefix, batch 1: measured seconds over ``profile``'s eq. 16 prediction."""
    prof = get_profile(profile)
    out = []
    for r in (r for r in rows if r["batch"] == 1):
        pred = t_verify_s(dims, r["prefix"], r["k"], prof)
        out.append({"k": r["k"], "prefix": r["prefix"], "measured_ms": 1e3 * r["seconds"],
                    f"{profile}_ms": 1e3 * pred, "ratio": r["seconds"] / pred})
    return out
