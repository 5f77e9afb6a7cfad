"""Mahimahi link traces <-> CSI traces: pure conversions (rates only) and the file reader/writer.

A Mahimahi trace (``mm-link UP DOWN``) has one line per 1500-byte delivery opportunity, giving its time in ms
from the trace start; a time repeats for several packets in the same millisecond, times never decrease, and the
file loops with a period of its last time.  An opportunity at ms ``t`` is counted in the millisecond ``(t-1, t]``.

It carries rates only: RTT and PER are given apart (``--rtt-ms``, ``--per``).  A window in which a direction
delivers nothing becomes an outage row of the CSI trace (its CSI columns repeat the row before it), except the
last window, which a CSI trace cannot end with; there the rate is one opportunity per window.
Writing: the bits the CSI trace lets through by the end of each millisecond, counted in whole 1500-byte
opportunities, so that any window holds its rate to within one opportunity; outage rows deliver nothing.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from channel.csi import CSI
from channel.csitrace import CSITrace
from channel.outage import Outages

MTU_BYTES = 1500  # one Mahimahi delivery opportunity
MTU_BITS = MTU_BYTES * 8


def parse_mahimahi(text: str, name: str = "<trace>") -> np.ndarray:
    """Delivery times, ms, [N] int64; ValueError naming the file and line on a bad or decreasing time."""
    out: list[int] = []
    for n, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if not s:
            continue
        if not s.isdigit():
            raise ValueError(f"{name}: line {n}: expected a time in whole ms, got {s!r}")
        t = int(s)
        if out and t < out[-1]:
            raise ValueError(f"{name}: line {n}: time {t} ms is before the line above it ({out[-1]} ms)")
        out.append(t)
    if not out:
        raise ValueError(f"{name}: no delivery times (a Mahimahi trace has one time in ms per line)")
    if out[-1] <= 0:
        raise ValueError(f"{name}: line {len(out)}: the last time must be > 0 ms (it is the loop period)")
    return np.asarray(out, dtype=np.int64)


def read_mahimahi(path: str | Path) -> np.ndarray:
    """parse_mahimahi of a file."""
    return parse_mahimahi(Path(path).read_text(), str(path))


def window_counts(times_ms: np.ndarray, window_ms: int, n_windows: int) -> np.ndarray:
    """Opportunities per window, [n_windows] int; the trace loops to fill windows past its period."""
    period = int(times_ms[-1])
    slot = np.maximum(times_ms - 1, 0) // window_ms  # ms (t-1, t] lies in window (t-1) // W
    per_loop = np.bincount(slot, minlength=math.ceil(period / window_ms))
    if period % window_ms == 0:  # the loop is a whole number of windows: tile it
        reps = math.ceil(n_windows / len(per_loop))
        return np.tile(per_loop, reps)[:n_windows]
    span = n_windows * window_ms  # otherwise unroll the loop in ms
    loops = math.ceil(span / period)
    t = (times_ms[None, :] + period * np.arange(loops)[:, None]).ravel()
    t = t[t <= span]
    return np.bincount(np.maximum(t - 1, 0) // window_ms, minlength=n_windows)[:n_windows]


def mahimahi_to_trace(up_ms: np.ndarray, down_ms: np.ndarray, rtt_ms: float, window_s: float,
                      per: float = 0.0) -> CSITrace:
    """A CSI trace with one row per window over the longer period; rates from the opportunities per window."""
    window_ms = int(round(window_s * 1000))
    if window_ms < 1:
        raise ValueError(f"window_s must be >= 0.001 s, got {window_s}")
    n = math.ceil(max(int(up_ms[-1]), int(down_ms[-1])) / window_ms)
    up, down = window_counts(up_ms, window_ms, n), window_counts(down_ms, window_ms, n)
    to_mbps = MTU_BITS / (window_ms / 1000) / 1e6
    rows: list[CSI] = []
    spans = []
    for i in range(n):
        silent = up[i] == 0 or down[i] == 0
        if silent and i < n - 1:
            spans.append((i * window_s, (i + 1) * window_s))
            rows.append(rows[-1] if rows else None)  # filled below when the trace starts silent
            continue
        rows.append(CSI(max(up[i], 1) * to_mbps, max(down[i], 1) * to_mbps, rtt_ms, per, per))
    first = next((c for c in rows if c is not None), None)
    rows = [c or first for c in rows]
    return CSITrace(tuple(i * window_s for i in range(n)), tuple(rows), outage_spans=Outages.make(spans).spans)


def trace_duration_s(trace: CSITrace, duration_s: float | None) -> float:
    """The span to write: duration_s, else the trace's period (a one-row trace needs duration_s)."""
    d = trace.period_s if duration_s is None else duration_s
    if not (math.isfinite(d) and d >= 0.001):
        raise ValueError(f"a one-row trace has no length: give --duration-s (got {d})")
    return d


def trace_to_mahimahi(trace: CSITrace, direction: str, duration_s: float) -> np.ndarray:
    """Delivery times, ms, [N] int64, of one direction ('up' or 'down') over duration_s (whole ms)."""
    if direction not in ("up", "down"):
        raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")
    n_ms = int(round(duration_s * 1000))
    bits = _cumulative_bits(trace, direction, n_ms)  # [n_ms + 1]
    whole = np.floor(bits / MTU_BITS + 1e-9).astype(np.int64)
    per_ms = np.diff(whole)  # [n_ms] opportunities in ms (j, j + 1]
    times = np.repeat(np.arange(1, n_ms + 1, dtype=np.int64), per_ms)
    if len(times) == 0:
        raise ValueError(f"the {direction}link delivers no 1500-byte packet in {duration_s} s: rate too low")
    if times[-1] != n_ms:  # the period is the last time: end on the last ms
        times[-1] = n_ms
    return times


def _cumulative_bits(trace: CSITrace, direction: str, n_ms: int) -> np.ndarray:
    """Bits the link lets through from 0 to each whole ms, [n_ms + 1]; outages let nothing through."""
    ms = np.arange(n_ms + 1, dtype=np.float64)
    edges = [int(round(t * 1000)) for t in trace.t_s] + [n_ms]
    rate_bits_per_ms = np.zeros(n_ms)
    for i, c in enumerate(trace.csis):
        r = c.rate_up_mbps if direction == "up" else c.rate_down_mbps
        if not math.isfinite(r):
            raise ValueError(f"row {i} (t_s={trace.t_s[i]}): an unlimited rate has no Mahimahi form")
        rate_bits_per_ms[min(edges[i], n_ms):min(max(edges[i + 1], edges[i]), n_ms)] = r * 1e3
    for a, b in trace.outages.spans:
        rate_bits_per_ms[min(int(round(a * 1000)), n_ms):min(int(round(b * 1000)), n_ms)] = 0.0
    first = min(edges[0], n_ms)
    rate_bits_per_ms[:first] = rate_bits_per_ms[first] if first < n_ms else 0.0  # the first row holds before it
    return np.concatenate([[0.0], np.cumsum(rate_bits_per_ms)])[: len(ms)]


def format_mahimahi(times_ms: np.ndarray) -> str:
    """The file text: one time per line."""
    return "".join(f"{int(t)}\n" for t in times_ms)
