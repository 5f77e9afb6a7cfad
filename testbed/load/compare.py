"""Compare two ``testbed.load --sweep`` runs (a baseline and a candidate scheduler) on the tightest SLO class.

``python -m testbed.loadcompare BASELINE_DIR CANDIDATE_DIR [--over 0.2] [--cut 0.5] [--capacity-ratio 1.5]``
reads each run's ``sweep.csv``, ``capacity.json`` and ``config.json`` and checks WISP's two claims: at every
swept N where the baseline violates the tightest class's SLO for more than ``over`` of its requests, the
candidate's rate is at most ``cut`` times the baseline's; and the candidate's capacity for that class is at
least ``capacity_ratio`` times the baseline's.  ``--feasible`` compares the rates over feasible requests
(``viol_feasible_*``, ``capacity_feasible``: requests whose budget the link alone had not used up, see
``testbed.load.summarize``).  Prints a table and writes ``compare.json`` (``compare_feasible.json``) to the
candidate's directory (or ``--out``).

Several runs per side (``FCFS1,FCFS2 SLO1,SLO2``) are pooled: every repeat of every run (``sweep_repeats.csv``,
or ``sweep.csv`` for a run of one repeat) is averaged per N, and the capacities are recomputed from the pooled
means with the first run's epsilon.
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

import config
from testbed.common.machine import machine_info


def class_columns(sweep: pd.DataFrame, prefix: str = "viol_") -> list[str]:
    """The sweep's per-class rate columns under ``prefix`` ("viol_50": class 50 tok/s)."""
    return [c for c in sweep.columns if c.startswith(prefix) and c[len(prefix):].replace(".", "", 1).isdigit()]


def tightest_class(sweep: pd.DataFrame, prefix: str = "viol_") -> str:
    """The sweep's class column with the highest token-speed target ("viol_50" -> 50 tok/s)."""
    cols = class_columns(sweep, prefix)
    if not cols:
        raise ValueError(f"the sweep has no {prefix}<class> columns")
    return max(cols, key=lambda c: float(c[len(prefix):]))


def capacity(sweep: pd.DataFrame, classes: list[float], epsilon: float, prefix: str = "viol_") -> dict[str, int]:
    """Per class: the largest swept N up to which every swept N has a violation rate <= epsilon (0 if the
    smallest already fails); a noisy pass after a failure does not count.  ``prefix`` picks the rate columns
    (``viol_``: all requests, ``viol_feasible_``: feasible ones)."""
    out = {}
    for c in classes:
        col, cap = f"{prefix}{c:g}", 0
        for n, v in sorted(zip(sweep["ues"], sweep[col] if col in sweep else [float("inf")] * len(sweep))):
            if not v <= epsilon:
                break
            cap = int(n)
        out[f"{c:g}"] = cap
    return out


def mean_sweep(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per N: the mean over its repeats (errors summed), with the number of repeats."""
    if "repeat" not in rows:
        return rows
    mean = rows.drop(columns="repeat").groupby("ues", as_index=False).mean()
    if "errors" in rows:
        mean["errors"] = rows.groupby("ues")["errors"].sum().to_numpy()
    return mean.assign(repeats=rows.groupby("ues")["repeat"].count().to_numpy())


def compare(base: pd.DataFrame, cand: pd.DataFrame, base_cap: dict, cand_cap: dict, over: float = 0.2,
            cut: float = 0.5, capacity_ratio: float = 1.5, prefix: str = "viol_") -> dict:
    """The two checks on the tightest class (pure): per-N rates where the baseline is over ``over``, capacities;
    and, for the record, both sides' goodput per N (what the candidate pays for the tightest class)."""
    col = tightest_class(base, prefix)
    cls = col[len(prefix):]
    points = [p | {"pass": bool(p["cand"] <= cut * p["base"])}
              for p in side_by_side(base, cand, col) if p["base"] > over]
    b, c = int(base_cap[cls]), int(cand_cap[cls])
    cap_ratio = c / b if b else (float("inf") if c else float("nan"))
    return {"class_tok_s": float(cls), "rates": prefix, "over": over, "cut": cut, "points": points,
            "cut_pass": bool(points) and all(p["pass"] for p in points),
            "capacity_base": b, "capacity_cand": c, "capacity_ratio": cap_ratio,
            "capacity_pass": bool(cap_ratio >= capacity_ratio), "capacity_ratio_target": capacity_ratio,
            "goodput": _measured(side_by_side(base, cand, "goodput_tok_s")),
            "goodput_active": _measured(side_by_side(base, cand, "goodput_active_tok_s"))}


def side_by_side(base: pd.DataFrame, cand: pd.DataFrame, col: str) -> list[dict]:
    """Per N present in both: the column's baseline and candidate values and their ratio ([] where either lacks
    the column)."""
    if col not in base or col not in cand:
        return []
    both = base[["ues", col]].merge(cand[["ues", col]], on="ues", suffixes=("_base", "_cand"))
    both["ratio"] = both[f"{col}_cand"] / both[f"{col}_base"]  # a Series: NaN or inf without a warning
    return [{"ues": int(r.ues), "base": float(r[f"{col}_base"]), "cand": float(r[f"{col}_cand"]),
             "ratio": float(r.ratio)} for _, r in both.iterrows()]


def _measured(rows: list[dict]) -> list[dict]:
    """The rows where both sides have a value (a NaN: a run from before the metric existed)."""
    return [r for r in rows if not (math.isnan(r["base"]) or math.isnan(r["cand"]))]


def load_run(path: Path, feasible: bool = False) -> tuple[pd.DataFrame, dict, dict]:
    """(sweep.csv, capacity per class, config) of one sweep directory."""
    key = "capacity_feasible" if feasible else "capacity"
    try:
        sweep = pd.read_csv(path / "sweep.csv")
        caps = json.loads((path / "capacity.json").read_text())
        if key not in caps:
            raise SystemExit(f"{path}/capacity.json has no {key}: rebuild it with python -m testbed.load "
                             f"--resummarize {path}")
        cap = caps[key]
        cfg = json.loads((path / "config.json").read_text())
    except FileNotFoundError as e:
        raise SystemExit(f"{path} is not a finished testbed.load --sweep run: {e.filename} is missing") from None
    return sweep, cap, cfg


def load_runs(paths: list[Path], feasible: bool = False) -> tuple[pd.DataFrame, dict, dict]:
    """One run as load_run; several pooled: the mean per N of all their repeats, capacities recomputed."""
    if len(paths) == 1:
        return load_run(paths[0], feasible)
    tables, cfgs = [], []
    for p in paths:
        _, _, cfg = load_run(p, feasible)
        rep = p / "sweep_repeats.csv"
        tables.append(pd.read_csv(rep) if rep.exists() else pd.read_csv(p / "sweep.csv").assign(repeat=0))
        cfgs.append(cfg)
    sweep = mean_sweep(pd.concat(tables, ignore_index=True))
    prefix = "viol_feasible_" if feasible else "viol_"
    classes = [float(col[len(prefix):]) for col in class_columns(sweep, prefix)]
    cap = capacity(sweep, classes, float(cfgs[0].get("epsilon", 0.1)), prefix)
    return sweep, cap, cfgs[0] | {"pooled_runs": [str(p) for p in paths],
                                  "pooled_repeats": int(sweep["repeats"].min())}


def report(res: dict, base_cfg: dict, cand_cfg: dict) -> str:
    """Human-readable lines for the printed comparison."""
    which = "feasible requests" if res["rates"] == "viol_feasible_" else "all requests"
    lines = [f"tightest class {res['class_tok_s']:g} tok/s, {which}: {base_cfg.get('scheduler')} (baseline) vs "
             f"{cand_cfg.get('scheduler')} (candidate)"]
    for side, cfg in (("baseline", base_cfg), ("candidate", cand_cfg)):
        if "pooled_runs" in cfg:
            lines.append(f"  {side}: {len(cfg['pooled_runs'])} runs pooled, {cfg['pooled_repeats']} repeats per N")
    if not res["points"]:
        lines.append(f"  the baseline never violates more than {res['over']:.0%}: no loaded point to compare")
    for p in res["points"]:
        lines.append(f"  N={p['ues']}: {p['base']:.1%} -> {p['cand']:.1%} (x{p['ratio']:.2f}, "
                     f"{'pass' if p['pass'] else 'FAIL'}: <= x{res['cut']:g})")
    lines.append(f"  capacity {res['capacity_base']} -> {res['capacity_cand']} UEs (x{res['capacity_ratio']:.2f}, "
                 f"{'pass' if res['capacity_pass'] else 'FAIL'}: >= x{res['capacity_ratio_target']:g})")
    for key, what in (("goodput", "goodput, all classes"), ("goodput_active", "goodput while every UE runs")):
        if res.get(key):
            lines.append(f"  {what} (tok/s): " + ", ".join(
                f"N={g['ues']} {g['base']:.0f} -> {g['cand']:.0f} (x{g['ratio']:.2f})" for g in res[key]))
    return "\n".join(lines)


@dataclass
class CompareConfig:
    """Which sweeps to compare and the pass thresholds."""

    baseline: list[str] = field(default_factory=list, metadata={"positional": True})  # sweep dir(s); a,b: pooled
    candidate: list[str] = field(default_factory=list, metadata={"positional": True})  # sweep dir(s); a,b: pooled
    over: float = 0.2  # loaded points: baseline violation rate above this fraction
    cut: float = 0.5  # pass: candidate rate <= cut * baseline rate at every loaded point
    capacity_ratio: float = 1.5  # pass: candidate capacity >= this times the baseline's, UEs
    feasible: bool = False  # compare the rates over feasible requests (viol_feasible_*)
    out: str | None = None  # where compare.json goes (None: the first candidate dir)


def main(argv: list[str] | None = None) -> dict:
    ap = config.add_flags(argparse.ArgumentParser(prog="python -m testbed.loadcompare",
                                                  description=__doc__.splitlines()[0]), CompareConfig)
    a = config.parse(CompareConfig, argv, ap)
    if not a.baseline or not a.candidate:
        ap.error("give a baseline and a candidate sweep directory")
    base, cand = [Path(p) for p in a.baseline], [Path(p) for p in a.candidate]
    (bs, bcap, bcfg), (cs, ccap, ccfg) = load_runs(base, a.feasible), load_runs(cand, a.feasible)
    res = compare(bs, cs, bcap, ccap, a.over, a.cut, a.capacity_ratio,
                  prefix="viol_feasible_" if a.feasible else "viol_")
    res |= {"baseline": ",".join(a.baseline), "candidate": ",".join(a.candidate),
            "baseline_config": bcfg, "candidate_config": ccfg}
    print(report(res, bcfg, ccfg))
    out = Path(a.out) if a.out else cand[0]
    out.mkdir(parents=True, exist_ok=True)
    (out / ("compare_feasible.json" if a.feasible else "compare.json")).write_text(json.dumps(res, indent=1))
    config.write_config(out, a, machine_info())
    return res


