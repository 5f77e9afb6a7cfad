"""A testbed run's per-round records -> a CSI trace: the link's configured CSI, or the UE's own estimate, per window.

Each round carries ``t_link_s`` (its start on the link's clock: seconds since the emulated link started, the epoch
on a real link), the CSI in force (``rtt_ms``, ``rate_*``, ``per``, ``per_down``) and the UE's estimate
(``est_*``).  A window's row is the mean of its rounds; windows without a round are left out (the row before holds).
On a real link the times start at the first round.  Estimates carry no loss: their PER is the UE's measured TCP
retransmission rate on a real link, 0 on an emulated one.  Outages are not carried (the run's config names them).
"""
from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd

from channel.csi import CSI
from channel.csitrace import CSITrace

SOURCES = ("link", "estimate")
COLUMNS = {  # source -> (rtt, rate up, rate down, per up, per down) record columns
    "link": ("rtt_ms", "rate_up_mbps", "rate_down_mbps", "per", "per_down"),
    "estimate": ("est_rtt_ms", "est_rate_up_mbps", "est_rate_down_mbps", "per", "per"),
}


def read_run(run_dir: str | Path) -> tuple[dict, pd.DataFrame]:
    """(config.json, every protocol's rounds.csv concatenated); ValueError naming the directory when empty."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir}: not a directory (give a testbed.run --out directory)")
    files = sorted(run_dir.glob("*/rounds.csv")) + sorted(run_dir.glob("rounds.csv"))  # testbed.run; testbed.ue
    frames = [f for f in (_read_csv(p) for p in files) if len(f)]
    if not frames:
        raise ValueError(f"{run_dir}: no rounds (no <protocol>/rounds.csv with a row): not a finished testbed.run")
    rounds = pd.concat(frames, ignore_index=True)
    if "t_link_s" not in rounds or rounds["t_link_s"].isna().all():
        raise ValueError(f"{files[0]}: line 1: no t_link_s column (written before rounds had a time): rerun it")
    return _run_config(run_dir), rounds


def _run_config(run_dir: Path) -> dict:
    """testbed.run's config.json; for a testbed.ue directory its config.toml (emulated when it has --link-json)."""
    if (run_dir / "config.json").exists():
        return json.loads((run_dir / "config.json").read_text())
    if (run_dir / "config.toml").exists():
        ue = tomllib.loads((run_dir / "config.toml").read_text())
        return {"link_emulated": ue.get("link_json") not in (None, "", "none")}
    return {}


def _read_csv(path: Path) -> pd.DataFrame:
    """One rounds.csv (empty when it holds no row)."""
    try:
        return pd.read_csv(path, dtype={"prompt_id": str, "ue_id": str, "protocol": str})
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a rounds CSV: {str(e).splitlines()[0]}") from None


def run_to_trace(cfg: dict, rounds: pd.DataFrame, source: str, window_s: float, name: str = "run") -> CSITrace:
    """The trace of one run: per window of ``window_s``, the mean CSI of its rounds from ``source``."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    emulated = bool(cfg.get("link_emulated", True))
    if source == "link" and not emulated:
        raise ValueError(f"{name}: --source link: the run was on a real link, which has no configured CSI "
                         "(use --source estimate)")
    df = _columns(rounds, source, emulated).dropna(subset=["t", "rtt", "up", "down"])
    if df.empty:
        raise ValueError(f"{name}: no round has a time and a {source} CSI (columns {COLUMNS[source][:3]})")
    t = df["t"] - (0.0 if emulated else df["t"].min())
    means = df.assign(w=np.floor(t / window_s).astype(int)).groupby("w").mean(numeric_only=True)
    csis = tuple(CSI(r.up, r.down, max(r.rtt, 0.0), min(r.per_up, 0.99), min(r.per_down, 0.99))
                 for r in means.itertuples())
    return CSITrace(tuple(float(w) * window_s for w in means.index), csis)


def _columns(rounds: pd.DataFrame, source: str, emulated: bool) -> pd.DataFrame:
    """t, rtt, up, down, per_up, per_down of each round (unlimited rates: inf; missing PER: 0)."""
    rtt, up, down, pu, pd_ = COLUMNS[source]
    def get(c: str) -> pd.Series:
        return pd.to_numeric(rounds[c], errors="coerce") if c in rounds else pd.Series(np.nan, rounds.index)

    out = pd.DataFrame({"t": get("t_link_s"), "rtt": get(rtt), "up": get(up), "down": get(down)})
    if source == "link":  # an empty rate is an unlimited link
        out[["up", "down"]] = out[["up", "down"]].fillna(math.inf)
    zero = source == "estimate" and emulated  # the estimate has no loss of its own on an emulated link
    out["per_up"] = 0.0 if zero else get(pu).fillna(0.0)
    out["per_down"] = 0.0 if zero else get(pd_).fillna(0.0)
    return out
