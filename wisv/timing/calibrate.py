"""Fit a measured hardware profile from timed forward calls: per-call overheads and a FLOP rate (least squares).

Model of one timed compute phase (a drafting run of K tokens = K calls, or a verification = one call) of
``passes`` forward calls of a model of ``n_weights`` weights doing ``flops`` FLOPs (eq. 13 counts)::

    t = a_phase + passes * (a_pass + a_weight * n_weights) + multirow * a_multi + flops / R

``a_phase`` (s per phase: starting work after an idle wait), ``a_pass`` (s per call: dispatch),
``a_weight`` (s per weight per call: streaming the weights, which is what makes a 1-token pass of a
bigger model slower even when its FLOPs are negligible), ``a_multi`` (s per call over more than one new position,
``multirow`` of them: a verification's causal-mask path, which on a CPU costs a small target far more than a 1-row
decode step: SmolLM2-135M, 91 ms for 2 rows after an idle wait against 55 ms for 1) and ``R`` (FLOP/s) are fitted by
non-negative
least squares on residuals relative to the median time of the timing's (role, K) group, ``(pred - t) /
median_group``, so short drafting calls weigh as much as long ones while, within a group, the fit tends
to the *mean* time (what sums of rounds need; dividing by each ``t`` itself would favour the fast
timings).  Timings whose relative residual is an outlier (another process took the core) are dropped and
the fit is repeated once.  ``profile_from_fit`` turns the fit into a ``HardwareProfile``:
``eta = R / peak`` against a measured dense-matmul peak, with the overheads as its per-call terms.

A calibration record (``save_calibration``) is the profile plus the per-exchange and per-chunk overheads of the
testbed and how they were measured; ``wisv.timing.hardware.load_profile`` reads its ``"profile"``.

A fit per end (``fit_ends``): the UE's profile from its own model's timings (the drafter's phases), the edge's from
the target's (its verification passes and its back-to-back decode streams, server-only's phase).  One fit over both
models prices neither well: on the SmolLM2 pair it put the target's 1-row pass after an idle wait at half its
measured time.  A record holds both (``"ends"``); ``load_profile(path, end)`` reads the one asked for.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from wisv.timing.hardware import ENDS, HardwareProfile

END_ROLES: dict[str, tuple[str, ...]] = dict(zip(ENDS, (("draft",), ("verify", "decode"))))  # the timings (by
#   CallTiming.role) each end's own fit reads: the UE's drafter, the edge's target
OUTLIER_MADS = 4.0  # a timing is an outlier when its relative residual is this many MADs above the median


@dataclass(frozen=True)
class CallTiming:
    """One timed compute phase: a span of forward calls."""

    role: str  # "draft" (the UE's K drafting calls), "verify" (the edge's one pass over the block) or "decode" (the
    #   edge's target decoding ``passes`` tokens back to back, one 1-row pass each: server-only's stream)
    passes: int  # forward calls in the span
    n_weights: float  # weights of the model streamed per call (wisv.timing.roundtime.n_weights)
    flops: float  # eq. 13 FLOPs of the span
    seconds: float  # measured wall time, s
    k: int = 0  # draft window of the round (bookkeeping)
    l: int = 0  # committed prefix length at the start of the round, tokens (bookkeeping)
    multirow: int = 0  # of the calls, those over more than one new position (a verification's K + 1 rows)

    @staticmethod
    def make_dummy(role: str = "draft") -> CallTiming:
        return CallTiming(role, passes=8, n_weights=4e5, flops=8e6, seconds=0.008, k=8, l=100)


@dataclass(frozen=True)
class ComputeFit:
    """Fitted coefficients of the per-call time model and how well they fit."""

    phase_overhead_s: float  # a_phase, s per compute phase
    pass_overhead_s: float  # a_pass, s per forward call
    weight_read_s: float  # a_weight, s per weight per forward call
    flops_per_s: float  # R, effective FLOP/s
    n_used: int  # timings kept after outlier rejection
    n_total: int  # timings given
    rel_err_median: float  # median |pred - t| / t over the kept timings
    rel_err_p90: float  # 90th percentile of the same
    multirow_overhead_s: float = 0.0  # a_multi, s per forward call over more than one new position

    def predict_s(self, passes: float, n_weights: float, flops: float, multirow: float = 0) -> float:
        """Predicted seconds of a phase (the module docstring's model)."""
        fixed = self.phase_overhead_s + passes * (self.pass_overhead_s + self.weight_read_s * n_weights)
        return fixed + multirow * self.multirow_overhead_s + flops / self.flops_per_s


def design_matrix(timings: Sequence[CallTiming]) -> np.ndarray:
    """[N, 5]: 1 (the phase), passes, passes * n_weights, multirow calls, flops."""
    return np.array([[1.0, t.passes, t.passes * t.n_weights, t.multirow, t.flops] for t in timings],
                    dtype=np.float64)


def fit_compute(timings: Sequence[CallTiming], outlier_mads: float = OUTLIER_MADS,
                flops_per_s: float | None = None) -> ComputeFit:
    """Non-negative least squares on relative residuals, refitted once without the outliers (``flops_per_s``: the
    FLOP rate given, not fitted: only the overheads are)."""
    if len(timings) < 4:
        raise ValueError(f"need at least 4 timings to fit 4 coefficients, got {len(timings)}")
    x, t = design_matrix(timings), np.array([s.seconds for s in timings], dtype=np.float64)  # [N, 5], [N]
    if not (t > 0).all():
        raise ValueError("every timing must have seconds > 0")
    if flops_per_s is not None and not 0 < flops_per_s < math.inf:
        raise ValueError(f"flops_per_s must be finite and > 0, got {flops_per_s}")
    scale = group_medians(timings)  # [N]
    keep = np.ones(len(t), dtype=bool)
    coef = _nnls_relative(x, t, scale, flops_per_s)
    rel = (x @ coef - t) / scale  # [N]
    med = np.median(rel)
    mad = np.median(np.abs(rel - med)) * 1.4826
    if mad > 0:
        keep = rel - med >= -outlier_mads * mad  # slow outliers have pred << t, i.e. rel very negative
        coef = _nnls_relative(x[keep], t[keep], scale[keep], flops_per_s)
    if not coef[-1] > 0:
        raise ValueError("the timings do not determine a FLOP rate; time calls of different sizes (several K)")
    err = np.abs(x[keep] @ coef / t[keep] - 1.0)
    return ComputeFit(float(coef[0]), float(coef[1]), float(coef[2]), float(1.0 / coef[-1]), int(keep.sum()), len(t),
                      float(np.median(err)), float(np.quantile(err, 0.9)), float(coef[3]))


def fit_ends(timings: Sequence[CallTiming], outlier_mads: float = OUTLIER_MADS) -> dict[str, ComputeFit]:
    """{end: its fit} for each end of ``END_ROLES`` on the timings of its own roles (at least 4 each).

    The edge's verification passes vary their rows, so its fit determines the FLOP rate; the UE's drafting phases
    (one row a call, so FLOPs grow with the calls) cannot tell a FLOP from a call, and take the edge's rate: on one
    calibrated machine it is the same processor."""
    mine = {end: [t for t in timings if t.role in roles] for end, roles in END_ROLES.items()}
    for end, rows in mine.items():
        if len(rows) < 4:
            raise ValueError(f"the {end}'s fit needs at least 4 timings of {'/'.join(END_ROLES[end])}, "
                             f"got {len(rows)}")
    edge = fit_compute(mine["edge"], outlier_mads)
    return {"ue": fit_compute(mine["ue"], outlier_mads, edge.flops_per_s), "edge": edge}


def group_medians(timings: Sequence[CallTiming]) -> np.ndarray:
    """[N]: the median seconds of each timing's (role, k, passes) group."""
    groups: dict[tuple, list[float]] = {}
    for s in timings:
        groups.setdefault((s.role, s.k, s.passes), []).append(s.seconds)
    med = {g: float(np.median(v)) for g, v in groups.items()}
    return np.array([med[(s.role, s.k, s.passes)] for s in timings], dtype=np.float64)


def _nnls_relative(x: np.ndarray, t: np.ndarray, w: np.ndarray, flops_per_s: float | None = None) -> np.ndarray:
    """Coefficients c >= 0 minimising sum(((x c - t) / w)^2); x [N, M], t [N], w [N] -> c [M] (the last, 1/R; given
    ``flops_per_s``, it is fixed at its inverse and the others are fitted)."""
    if flops_per_s is not None:
        c = _nnls_relative_free(x[:, :-1], t - x[:, -1] / flops_per_s, w)
        return np.append(c, 1.0 / flops_per_s)
    return _nnls_relative_free(x, t, w)


def _nnls_relative_free(x: np.ndarray, t: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Non-negative least squares of ((x c - t) / w), solved in column-scaled units; x [N, M] -> c [M]."""
    col = x.max(axis=0)  # columns differ by ~1e9 (calls vs FLOPs): solve in scaled units
    col[col == 0] = 1.0
    c, _ = nnls(x / col / w[:, None], t / w)
    return c / col


def profile_from_fit(fit: ComputeFit, peak_tflops: float, name: str = "local", source: str = "",
                     role: str = "any") -> HardwareProfile:
    """A ``HardwareProfile`` with eta = R / peak and the fitted per-call overheads.

    If R exceeds ``peak_tflops`` (eq. 13 is only a FLOP estimate), the peak is raised to R and eta = 1."""
    if not peak_tflops > 0:
        raise ValueError(f"peak_tflops must be > 0, got {peak_tflops}")
    r_tflops = fit.flops_per_s / 1e12
    peak = max(peak_tflops, r_tflops)
    note = f"fit: R = {r_tflops * 1e3:.3g} GFLOP/s against a measured peak of {peak_tflops * 1e3:.3g} GFLOP/s"
    return HardwareProfile(name, peak_tflops=peak, eta=min(1.0, r_tflops / peak), source=f"{source} [{note}]".strip(),
                           role=role, pass_overhead_s=fit.pass_overhead_s, weight_read_s=fit.weight_read_s,
                           phase_overhead_s=fit.phase_overhead_s, multirow_overhead_s=fit.multirow_overhead_s)


def fit_chunk_overhead(residual_s: Sequence[float]) -> float:
    """Host time per streamed chunk: the median over chunks of what the gap between two chunks' arrivals at the UE
    leaves after the later one's passes and its downlink time (on-device: its drafter passes), s (a negative median
    is clipped to 0)."""
    return _median_clipped(residual_s, "chunk after a stream's first")


def fit_start_overhead(residual_s: Sequence[float]) -> float:
    """Server-only's start beyond its warm model: the median over prompts of the first chunk's measured arrival less
    the model's (the OPEN, the GENERATE, one decode pass, the chunk's downlink), s (a negative median is clipped
    to 0)."""
    return _median_clipped(residual_s, "server-only prompt")


def _median_clipped(residual_s: Sequence[float], unit: str) -> float:
    if not len(residual_s):
        raise ValueError(f"need at least one {unit} to measure its overhead")
    return max(0.0, float(np.median(np.asarray(residual_s, float))))


def fit_exchange_overhead(residual_s: Sequence[float], exchanges: Sequence[int]) -> float:
    """Fixed time per request/reply exchange: the median over units (e.g. prompts) of residual / exchanges, s.

    ``residual_s`` is what the unit's measured time leaves after its measured compute and the ideal link
    model; a negative median is clipped to 0."""
    if len(residual_s) != len(exchanges) or not len(residual_s):
        raise ValueError(f"need equal, non-zero numbers of residuals and exchange counts, "
                         f"got {len(residual_s)} and {len(exchanges)}")
    if min(exchanges) < 1:
        raise ValueError("every unit must have at least one exchange")
    return max(0.0, float(np.median(np.asarray(residual_s, float) / np.asarray(exchanges, float))))


@dataclass
class Calibration:
    """A measured ``local`` profile, the testbed's per-exchange overhead, and how they were measured."""

    profile: HardwareProfile  # compute: eta, peak and per-call overheads
    exchange_overhead_s: float = 0.0  # fixed host time per request/reply exchange, s (0: not measured)
    fit: dict = field(default_factory=dict)  # asdict(ComputeFit)
    notes: dict = field(default_factory=dict)  # measurement settings, per-(role, K) medians, machine
    ends: dict[str, HardwareProfile] = field(default_factory=dict)  # {"ue": ..., "edge": ...}: a fit per end (empty:
    #   an older record, whose one profile serves both ends)
    end_fits: dict = field(default_factory=dict)  # {end: asdict(ComputeFit)}
    chunk_overhead_s: float = 0.0  # host time per streamed chunk beyond its passes, s (0: not measured)
    ue_chunk_overhead_s: float = 0.0  # the UE's host time per chunk it generates itself (on-device), s (0: not
    #   measured)
    stream_start_overhead_s: float = 0.0  # server-only's first chunk's arrival beyond its warm model, s (0: not
    #   measured; Deployment.stream_start_overhead_s)

    def for_end(self, end: str) -> HardwareProfile:
        """The profile of one end ("ue" or "edge"): its own fit where the record has one, else the shared one."""
        return self.ends.get(end, self.profile)


def save_calibration(cal: Calibration, path: str | Path) -> Path:
    """Write the record as JSON (``wisv.timing.hardware.load_profile`` reads its profile)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"profile": cal.profile.to_dict(), "exchange_overhead_s": cal.exchange_overhead_s, "fit": cal.fit,
           "ends": {e: p.to_dict() for e, p in cal.ends.items()}, "end_fits": cal.end_fits,
           "chunk_overhead_s": cal.chunk_overhead_s, "ue_chunk_overhead_s": cal.ue_chunk_overhead_s,
           "stream_start_overhead_s": cal.stream_start_overhead_s, "notes": cal.notes}
    path.write_text(json.dumps(doc, indent=1, default=_json_default) + "\n")
    return path


def load_calibration(path: str | Path) -> Calibration:
    """Read a record written by ``save_calibration``; a plain profile file gives exchange_overhead_s = 0."""
    from wisv.timing.hardware import load_profile
    profile = load_profile(path)
    doc = json.loads(Path(path).read_text())
    if "profile" not in doc:
        return Calibration(profile)
    ex, chunk = float(doc.get("exchange_overhead_s", 0.0)), float(doc.get("chunk_overhead_s", 0.0))
    ue_chunk, start = float(doc.get("ue_chunk_overhead_s", 0.0)), float(doc.get("stream_start_overhead_s", 0.0))
    for name, v in (("exchange_overhead_s", ex), ("chunk_overhead_s", chunk), ("ue_chunk_overhead_s", ue_chunk),
                    ("stream_start_overhead_s", start)):
        if not 0 <= v < math.inf:
            raise ValueError(f"{path}: {name} must be finite and >= 0, got {v}")
    ends = {e: load_profile(path, e) for e in doc.get("ends", {})}
    return Calibration(profile, ex, dict(doc.get("fit", {})), dict(doc.get("notes", {})), ends,
                       dict(doc.get("end_fits", {})), chunk, ue_chunk, start)


def _json_default(o: object) -> object:
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
