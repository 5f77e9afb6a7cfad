"""Make the two small shipped Mahimahi traces (scripts/link/traces/mahimahi/) and the CSI traces they were made from.

``python -m scripts.link.mahimahi_traces`` writes, for each NAME, ``NAME.csv`` (our CSI trace) and ``NAME.up`` /
``NAME.down`` (its Mahimahi form, ``python -m channel.trace to-mahimahi``):

- ``step``: 4 Mbit/s up, 8 down for 10 s, then 1 up, 2 down for 10 s (a 20 s loop; RTT 40 ms in the CSV only);
- ``walk``: 30 s of 1 s rows, rates a seeded log-normal random walk around 3 up / 6 down Mbit/s, clipped to
  [0.6, 12], with a 1 s stall (an outage) at 20 s; RTT 30 ms in the CSV only.
Mahimahi keeps the rates (and the stall: no delivery); RTT and PER are given apart when reading them back.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from channel.csi import CSI
from channel.csitrace import CSITrace, save_trace
from channel.mahimahi import format_mahimahi, trace_duration_s, trace_to_mahimahi

OUT = Path(__file__).resolve().parent / "traces" / "mahimahi"


def step_trace() -> CSITrace:
    """A rate step: good for 10 s, poor for 10 s."""
    return CSITrace((0.0, 10.0), (CSI(4, 8, 40), CSI(1, 2, 40)))


def walk_trace(seed: int = 0, n: int = 30) -> CSITrace:
    """A seeded log-normal walk of 1 s rows with a 1 s stall at 20 s."""
    rng = np.random.default_rng(seed)
    steps = np.cumsum(rng.normal(0.0, 0.25, size=(n, 2)), axis=0)  # [n, 2] log-rate offsets (up, down)
    up = np.clip(3.0 * np.exp(steps[:, 0]), 0.6, 12.0)
    down = np.clip(6.0 * np.exp(steps[:, 1]), 0.6, 12.0)
    csis = tuple(CSI(round(float(u), 2), round(float(d), 2), 30.0) for u, d in zip(up, down))
    return CSITrace(tuple(float(i) for i in range(n)), csis, outage_spans=((20.0, 21.0),))


def write(name: str, trace: CSITrace, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    save_trace(trace, out / f"{name}.csv")
    for d in ("up", "down"):
        times = trace_to_mahimahi(trace, d, trace_duration_s(trace, None))
        (out / f"{name}.{d}").write_text(format_mahimahi(times))
        print(f"{out / f'{name}.{d}'}: {len(times)} packets, period {times[-1]} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.link.mahimahi_traces", description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default=str(OUT), help="where to write (default: scripts/link/traces/mahimahi)")
    out = Path(ap.parse_args(argv).out_dir)
    write("step", step_trace(), out)
    write("walk", walk_trace(), out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
