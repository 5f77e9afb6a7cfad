"""How right the auto window's round time is: replay a run's rounds through the tracker and compare.

Usage: ``python -m scripts.bench.window_predict RUN_DIR [RUN_DIR ...] [--protocol greedy] [--out FILE]``.
For each round of ``RUN_DIR/PROTOCOL/rounds.csv`` (a live run, the CSI in force recorded), the tracker as it stood
before that round's verdict predicts the round's time at the K it drafted, with the terms the window prices
(wisv.timing.window: the drafting line, the link model, the edge's time, the overhead) and with the old terms
(``K tau_d``, the link model and the edge's time only); both against the round's measured ``t_round_s``, summed per
link state (the sum is what a time per committed token adds up).  Writes ``window_predict.json`` beside the
command's settings.  A measurement of the model, not a test.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from channel.csi import CSI
from protocols.accounting import wire_payload_bits
from wisv.records.rows import read_records
from wisv.timing.window import WindowTracker, round_cost


@dataclass
class PredictConfig:
    """window_predict settings (saved with the results)."""

    runs: list[str] = field(default_factory=list)  # run directories (testbed.run --out)
    protocol: str = "greedy"  # the protocol's rounds to replay (priced with its link model)
    drafter_hidden: int = 64  # the drafter's hidden size, for a protocol that uploads hidden states
    out: str = "runs/window_predict.json"  # where the JSON goes


def replay(rounds: pd.DataFrame, protocol: str, drafter_hidden: int) -> pd.DataFrame:
    """Per round after the first: the link state, the predicted time (new and old terms) and the measured time, s."""
    pb, w, rows = wire_payload_bits(drafter_hidden, 1), WindowTracker(), []
    for r in rounds.itertuples():
        csi = CSI(r.rate_up_mbps if r.rate_up_mbps == r.rate_up_mbps else float("inf"),
                  r.rate_down_mbps if r.rate_down_mbps == r.rate_down_mbps else float("inf"), r.rtt_ms)
        k = int(r.drafted)
        new = w.round_s(protocol, csi, pb)
        if w.tau_d_s is not None and k > 0:
            old = round_cost(protocol, csi, pb, w.tau_d_s, w.verify.predict_s)
            rows.append({"state": f"{csi.rate_up_mbps:g} Mbps / {csi.rtt_ms:g} ms", "new_s": new(k), "old_s": old(k),
                         "measured_s": r.t_round_s})
        w.update(k, int(r.accepted), None, r.t_draft_s, r.t_edge_s, t_round_s=r.t_round_s)
    return pd.DataFrame(rows)


def summarise(x: pd.DataFrame) -> dict:
    """Per link state: rounds, and the predicted total over the measured total, minus 1 (new and old terms)."""
    return {state: {"rounds": len(g), "new_vs_measured": g.new_s.sum() / g.measured_s.sum() - 1,
                    "old_vs_measured": g.old_s.sum() / g.measured_s.sum() - 1} for state, g in x.groupby("state")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run directories (testbed.run --out)")
    ap.add_argument("--protocol", default=PredictConfig.protocol)
    ap.add_argument("--drafter-hidden", type=int, default=PredictConfig.drafter_hidden)
    ap.add_argument("--out", default=PredictConfig.out)
    a = ap.parse_args(argv)
    cfg = PredictConfig(a.runs, a.protocol, a.drafter_hidden, a.out)
    missing = [r for r in cfg.runs if not (Path(r) / cfg.protocol / "rounds.csv").is_file()]
    if missing:
        print(f"error: no {cfg.protocol}/rounds.csv under {missing[0]}", file=sys.stderr)
        return 2
    out = {"config": asdict(cfg), "runs": {}}
    for run in cfg.runs:
        out["runs"][run] = summarise(replay(read_records(Path(run) / cfg.protocol / "rounds.csv"), cfg.protocol,
                                            cfg.drafter_hidden))
        print(run, json.dumps(out["runs"][run], indent=None))
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
