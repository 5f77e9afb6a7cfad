"""The chaos harness's fault schedule and link trace: pure functions of a seed (FoundationDB-style: the same seed
replays the same schedule).

Faults arrive with exponential gaps; each has a kind, a target (the edge, one UE, the link, or a probe), a start and
a duration.  Faults on one target do not overlap (a process is not killed while stopped); faults on different
targets do, as in a real lab.  The link faults (outages, PER bursts, rate collapses) are written into the CSI trace
the emulator replays over a varying base (rate and RTT redrawn every ``BASE_STEP_S``).
"""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass

KINDS = ("edge_kill", "edge_stop", "ue_stop", "ue_kill", "outage", "per_burst", "rate_collapse", "probe")
LINK_KINDS = ("outage", "per_burst", "rate_collapse")  # written into the link's trace
PROBES = ("pong_pinning", "session_hog", "parts_bomb", "slowloris", "reference_flood")  # testbed/hostile/probes.py
BASE_STEP_S = 10.0  # the base trace's rate and RTT change this often, s
GAP_AFTER_S = 1.0  # one target's next fault starts at least this long after its last one ends, s


@dataclass(frozen=True)
class Fault:
    """One scheduled fault."""

    t_s: float  # start, s from the harness's start
    kind: str  # one of KINDS
    target: str  # "edge", "ue<N>", "link" or the probe's name
    duration_s: float  # how long it lasts (kills: 0; the restart follows at once), s
    level: float = 0.0  # per_burst: the PER; rate_collapse: the rate, Mbit/s; else unused

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Draw:
    """The schedule's knobs."""

    duration_s: float = 90.0  # faults start within [warmup_s, duration_s), s
    warmup_s: float = 10.0  # no fault before this, s
    mean_gap_s: float = 5.0  # mean time between two fault starts, s
    ues: int = 6  # UE processes
    max_outage_s: float = 20.0  # outages last 1 s up to this, s


def _duration(rng: random.Random, kind: str, d: Draw) -> tuple[float, float]:
    """(duration_s, level) of a fault of ``kind``."""
    if kind in ("edge_kill", "ue_kill"):
        return 0.0, 0.0
    if kind == "outage":
        return rng.uniform(1.0, max(1.0, d.max_outage_s)), 0.0
    if kind == "per_burst":
        return rng.uniform(2.0, 10.0), rng.uniform(0.02, 0.2)
    if kind == "rate_collapse":
        return rng.uniform(3.0, 15.0), rng.uniform(0.2, 1.0)
    if kind == "edge_stop":
        return rng.uniform(1.0, 5.0), 0.0
    if kind == "ue_stop":
        return rng.uniform(1.0, 15.0), 0.0
    return rng.uniform(2.0, 8.0), 0.0  # probe


def _target(rng: random.Random, kind: str, d: Draw) -> str:
    if kind.startswith("edge"):
        return "edge"
    if kind.startswith("ue"):
        return f"ue{rng.randrange(d.ues)}"
    return rng.choice(PROBES) if kind == "probe" else "link"


def draw_schedule(seed: int, d: Draw) -> list[Fault]:
    """The faults of ``seed``, in start order; kinds cycle through a shuffled deck so that every kind comes often."""
    rng = random.Random(seed)
    faults, busy, t, deck = [], {}, d.warmup_s, []
    while True:
        t += rng.expovariate(1.0 / d.mean_gap_s)
        if t >= d.duration_s:
            return sorted(faults, key=lambda f: f.t_s)
        if not deck:
            deck = list(KINDS)
            rng.shuffle(deck)
        kind = deck.pop()
        target = _target(rng, kind, d)
        lane = "probe" if kind == "probe" else target  # one probe at a time
        start = max(t, busy.get(lane, 0.0))
        dur, level = _duration(rng, kind, d)
        if start >= d.duration_s:
            continue
        start, dur = math.ceil(start * 1000) / 1000, round(dur, 3)  # in ms, never before the lane is free
        faults.append(Fault(start, kind, target, dur, round(level, 4)))
        busy[lane] = start + dur + GAP_AFTER_S


def link_trace(seed: int, faults: list[Fault], until_s: float) -> list[dict]:
    """The CSI trace rows (t_s, rate_up_mbps, rate_down_mbps, rtt_ms, per, outage) of a varying base link with the
    link faults laid over it; the last row holds from its time on."""
    rng = random.Random(seed ^ 0x5EED)
    base = [(k * BASE_STEP_S, rng.choice((5.0, 10.0, 20.0, 50.0)), rng.choice((10.0, 20.0, 40.0, 60.0)))
            for k in range(int(until_s // BASE_STEP_S) + 2)]
    link = [f for f in faults if f.kind in LINK_KINDS]
    times = sorted({t for t, _, _ in base} | {f.t_s for f in link} | {f.t_s + f.duration_s for f in link})
    rows = []
    for t in times:
        _, rate, rtt = next(b for b in reversed(base) if b[0] <= t)
        row = {"t_s": round(t, 3), "rate_up_mbps": rate, "rate_down_mbps": rate, "rtt_ms": rtt, "per": 0.0,
               "outage": 0}
        for f in link:
            if f.t_s <= t < f.t_s + f.duration_s:
                row |= _overlay(f, rate)
        rows.append(row)
    return rows


def _overlay(f: Fault, rate: float) -> dict:
    if f.kind == "outage":
        return {"outage": 1}
    if f.kind == "per_burst":
        return {"per": f.level}
    return {"rate_up_mbps": min(rate, f.level), "rate_down_mbps": min(rate, f.level)}


def trace_csv(rows: list[dict]) -> str:
    cols = ("t_s", "rate_up_mbps", "rate_down_mbps", "rtt_ms", "per", "outage")
    return "\n".join([",".join(cols)] + [",".join(f"{r[c]:g}" for c in cols) for r in rows]) + "\n"
