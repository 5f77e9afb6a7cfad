"""The Spec-Bench table's other links, simulated from the live cells: each prompt re-timed under the link.

The live cells run over the good link.  For the poor link and the replay of a real LTE trace each prompt keeps its
measured compute and its rounds (K, what was accepted, what `auto` chose, the bytes each way) and gets the link time
of the other link instead (wisv/timing/retime.py), so every method's speed-up there is over server-only re-timed the
same way, on the same prompts.  Rows say "simulated": a method whose choices follow the link (`auto`'s hand-over and
protocol, an auto window) made them on the good link.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from channel.csi import CSI
from channel.csitrace import load_trace
from testbed.sim.validate import row_csi
from wisv.timing.protodesc import describe
from wisv.timing.retime import retime_run

LTE_TRACE = Path(__file__).resolve().parents[1] / "link" / "traces" / "lte_tmobile_short.csv"  # PROVENANCE.md there


@dataclass(frozen=True)
class SimLink:
    """A link the bench re-times the live cells under."""

    label: str  # the table's name for it
    csi_at: Callable[[float], CSI]  # the CSI at a time on the run's clock, s


def sim_links() -> dict[str, SimLink]:
    """The links by name (``--sim-links``): the docs' poor link, and T-Mobile's LTE trace (Mahimahi), looped."""
    poor = CSI(3.0, 3.0, 45.0)
    lte = load_trace(LTE_TRACE, loop=True)
    return {"poor": SimLink("poor 3 Mbit/s, 45 ms (simulated)", lambda _t: poor),
            "lte": SimLink("LTE trace T-Mobile, 50 ms (simulated)", lte.at)}


SIM_LINK_NAMES = ("poor", "lte")  # the choices of --sim-links


def retimed(outs: pd.DataFrame, rounds: pd.DataFrame, prompts: pd.DataFrame, live: CSI, link: SimLink
            ) -> pd.DataFrame:
    """A cell's outputs with each finished prompt's ``t_e2e_s`` re-timed under ``link``, in run order (rounds that
    recorded no CSI were under ``live``, the cell's link); a protocol with no round on the link (on-device) as it
    ran."""
    ok = outs[outs["error"].isna()] if "error" in outs else outs
    if len(rounds) and not describe(str(rounds["protocol"].iloc[0])).edge_rounds:
        return ok
    plen = dict(zip(prompts["prompt_id"].astype(str), prompts["prompt_ids"].map(len)))
    by_prompt = {str(k): g.sort_values("round").to_dict("records")
                 for k, g in rounds.groupby(rounds["prompt_id"].astype(str))} if len(rounds) else {}
    ids = ok["prompt_id"].astype(str).tolist()
    todo = [(float(t), by_prompt.get(pid, []), plen[pid]) for pid, t in zip(ids, ok["t_e2e_s"])]
    times = retime_run(todo, lambda row: row_csi(row, live), link.csi_at)
    return ok.assign(t_e2e_s=times)
