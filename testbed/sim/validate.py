"""Validation: predict each prompt of a ``testbed.run`` output from the ``local`` profile; compare with the measurement.

A prompt's measured time is the UE's ``t_e2e_s`` (OPEN to the last VERDICT).  Its prediction is the OPEN
exchange (prompt upload, one RTT, the target's prefill) plus eq. 22 over its rounds, each round predicted
from what the run recorded (protocol, K, mismatches/queried, prefix length) under the CSI in force
(``rounds.csv``; else the run's ``config.json`` link): compute from the profile, link time from the
testbed's wire-format payload sizes, plus the calibrated fixed time per exchange.  The drafter's first
round also pays its prompt prefill (its cache starts empty).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

import config
from channel.csi import CSI
from testbed.common.link import LinkSpec
from testbed.common.machine import machine_info
from wisv.records.rows import read_records
from wisv.tasks.jsonl import read_jsonl
from wisv.timing.alone import alone_s, decode_steps_s, open_exchange_s
from wisv.timing.compute import compute_s, verify_flops
from wisv.timing.protodesc import describe
from wisv.timing.roundtime import Deployment, RoundInputs, round_time_s, round_times

CSI_COLUMNS = ("rate_up_mbps", "rate_down_mbps", "rtt_ms", "per", "per_down")


@dataclass
class RunData:
    """What validation reads from a testbed.run directory."""

    link: dict  # config.json "link" (LinkSpec fields)
    prompt_len: dict[str, int]  # prompt_id -> prompt tokens
    rounds: dict[str, pd.DataFrame]  # protocol -> rounds.csv
    outputs: dict[str, pd.DataFrame]  # protocol -> outputs.jsonl (successful prompts)
    drafter: str | None  # config.json drafter dir (None: built-in)
    target: str | None  # config.json target dir (None: built-in)


def load_run(run_dir: str | Path) -> RunData:
    """Read config.json, prompts.jsonl and every <protocol>/rounds.csv + outputs.jsonl of a run."""
    run_dir = Path(run_dir)
    cfg_file = run_dir / "config.json"
    if not cfg_file.is_file():
        raise ValueError(f"{run_dir} is not a testbed.run output directory (no config.json)")
    cfg = json.loads(cfg_file.read_text())
    prompts = read_jsonl(run_dir / "prompts.jsonl")
    rounds, outputs = {}, {}
    for d in sorted(p for p in run_dir.iterdir() if (p / "rounds.csv").is_file() and (p / "outputs.jsonl").is_file()):
        out = pd.read_json(d / "outputs.jsonl", lines=True, dtype={"prompt_id": str})
        if "error" in out:
            out = out[out["error"].isna()]
        r = read_records(d / "rounds.csv")  # older runs' draft_len is read as drafted
        if len(r):  # a protocol whose every prompt failed has nothing to validate
            rounds[d.name], outputs[d.name] = r, out
    if not rounds:
        raise ValueError(f"{run_dir} has no <protocol>/rounds.csv with outputs.jsonl")
    return RunData(cfg.get("link", {}), {str(p["prompt_id"]): len(p["prompt_ids"]) for p in prompts},
                   rounds, outputs, cfg.get("drafter"), cfg.get("target"))


def wire_deployment(d, t, ue, edge, exchange_overhead_s: float = 0.0, vocab: int | None = None,
                    chunk_overhead_s: float = 0.0, ue_chunk_overhead_s: float = 0.0,
                    stream_start_overhead_s: float = 0.0) -> Deployment:
    """The testbed as it runs: the (local) profiles of the UE and the edge, the wire format's payload sizes."""
    from protocols.accounting import wire_payload_bits
    return Deployment(d, t, ue, edge, wire_payload_bits(d.d_model, d.vocab if vocab is None else vocab),
                      exchange_overhead_s=exchange_overhead_s, chunk_overhead_s=chunk_overhead_s,
                      ue_chunk_overhead_s=ue_chunk_overhead_s, stream_start_overhead_s=stream_start_overhead_s)


def row_csi(row: dict, fallback: CSI) -> CSI:
    """The CSI a round recorded as in force; missing values come from ``fallback``."""
    vals = {c: row.get(c) for c in CSI_COLUMNS}
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in vals.values()):
        return fallback
    return CSI(vals["rate_up_mbps"], vals["rate_down_mbps"], vals["rtt_ms"], vals["per"], vals["per_down"])


def with_prefix(rounds: pd.DataFrame, prompt_len: dict[str, int]) -> pd.DataFrame:
    """Add prompt_len and prefix_len (committed length L at each round's start) to one protocol's rounds."""
    r = rounds.sort_values(["prompt_id", "round"], kind="stable").copy()
    r["prompt_len"] = r["prompt_id"].map(prompt_len)
    if r["prompt_len"].isna().any():
        missing = sorted(set(r.loc[r["prompt_len"].isna(), "prompt_id"]))
        raise ValueError(f"rounds of prompts not in prompts.jsonl: {missing}")
    done_before = (r["accepted"] + 1).groupby(r["prompt_id"]).cumsum() - (r["accepted"] + 1)
    r["prefix_len"] = (r["prompt_len"] + done_before).astype(int)
    return r


open_s = open_exchange_s  # the OPEN exchange (wisv.timing.alone): one definition for every protocol


def predict_round_s(row: dict, csi: CSI, dep: Deployment) -> float:
    """One recorded round's predicted time; round 0 adds the drafter's prompt prefill."""
    k = max(1, int(row["drafted"]))
    m = int(row["queried"] if describe(row["protocol"]).hidden_query else row["mismatches"])
    t = round_time_s(RoundInputs(row["protocol"], k=k, l=int(row["prefix_len"]), m=min(m, k)), csi, dep)
    if int(row["round"]) == 0:
        t += compute_s(verify_flops(dep.drafter, 0, int(row["prompt_len"]) - 1, dep.consts), dep.ue)
    return t


def recorded_csi_at(recs: list[dict], fallback: CSI):
    """The CSI a prompt's chunks recorded as in force, as a step function of the time since its OPEN (each chunk's
    ``t_arrival_s``; before the first, the first's)."""
    marks = [(float(r.get("t_arrival_s") or 0.0), row_csi(r, fallback)) for r in recs]

    def at(t: float) -> CSI:
        csi = marks[0][1]
        for t_mark, c in marks:
            if t_mark > t:
                break
            csi = c
        return csi
    return at


def predict_prompt(protocol: str, recs: list[dict], prompt_len: int, fallback: CSI, dep: Deployment) -> tuple[float,
                                                                                                               float]:
    """(predicted OPEN-to-end time, its rounds-only part) of one prompt's recorded rounds: a speculative protocol's
    OPEN plus each round, or a model generating alone over the tokens it committed (wisv.timing.alone), in chunks
    of the largest it recorded (a round a chunk: every token, or --stream-every-tokens N's N)."""
    d = describe(protocol)
    if not d.speculative:
        n = int(sum(int(r["committed"]) for r in recs))
        chunk = max(1, max(int(r["committed"]) for r in recs))
        total = alone_s(d, prompt_len, n, recorded_csi_at(recs, fallback), dep, chunk)
        return total, total - (open_s(prompt_len, row_csi(recs[0], fallback), dep) if d.edge_rounds else 0.0)
    pred_rounds = sum(predict_round_s(r, row_csi(r, fallback), dep) for r in recs)
    return open_s(prompt_len, row_csi(recs[0], fallback), dep) + pred_rounds, pred_rounds


def compute_pair(protocol: str, recs: list[dict], dep: Deployment) -> tuple[float, float]:
    """The prompt's (measured, profiled) compute for the same work: its rounds' drafting and verification (a stream's
    passes, on-device's drafter steps), s."""
    d = describe(protocol)
    measured = float(pd.DataFrame(recs, columns=["t_draft_s", "t_verify_s"]).sum().sum())  # NaN: not this end's
    if d.speculative:
        times = [round_times(RoundInputs(r["protocol"], k=max(1, int(r["drafted"])), l=int(r["prefix_len"])),
                             CSI.ideal(), dep) for r in recs]
        return measured, sum(t.draft_s + t.verify_s for t in times)
    dims, profile = (dep.target, dep.edge) if d.edge_rounds else (dep.drafter, dep.ue)
    n = int(sum(int(r["committed"]) for r in recs))
    return measured, sum(decode_steps_s(dims, int(recs[0]["prefix_len"]) - 1, n, profile, dep))


def compute_ratio(protocol: str, recs: list[dict], dep: Deployment) -> float:
    """The prompt's measured compute over the profile's for the same work (``compute_pair``), s/s.  Not a
    prediction: it separates the machine's speed on the day (a shared VM drifts by tens of percent between minutes)
    from the rest of the model's error."""
    measured, predicted = compute_pair(protocol, recs, dep)
    return measured / predicted if predicted > 0 else math.nan


def predict_prompts(protocol: str, run: RunData, dep: Deployment) -> pd.DataFrame:
    """One row per successful prompt: prompt_id, protocol, predicted_s, measured_s, rounds, rounds-only parts."""
    fallback = LinkSpec(**run.link).fixed_csi()
    rounds = with_prefix(run.rounds[protocol], run.prompt_len)
    rows = []
    for pid, g in rounds.groupby("prompt_id", sort=False):
        recs = g.to_dict("records")
        total, pred_rounds = predict_prompt(protocol, recs, run.prompt_len[pid], fallback, dep)
        measured, profiled = compute_pair(protocol, recs, dep)
        rows.append({"prompt_id": pid, "protocol": protocol, "rounds": len(recs), "predicted_s": total,
                     "predicted_rounds_s": pred_rounds, "measured_rounds_s": float(g["t_round_s"].sum()),
                     "profiled_compute_s": profiled,
                     "compute_ratio": measured / profiled if profiled > 0 else math.nan,
                     "given_compute_s": total - profiled + measured})
    df = pd.DataFrame(rows)
    meas = run.outputs[protocol].set_index("prompt_id")["t_e2e_s"]
    df["measured_s"] = df["prompt_id"].map(meas)
    df = with_run_speed(df.dropna(subset=["measured_s"]), list(run.prompt_len))
    return df[["prompt_id", "protocol", "predicted_s", "measured_s", "rounds", "predicted_rounds_s",
               "measured_rounds_s", "profiled_compute_s", "compute_ratio", "given_compute_s", "dev", "run_speed",
               "run_speed_s"]]


def with_run_speed(df: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """One protocol's predictions, with the machine's speed taken from the run itself, held out: the prompts at even
    positions of the run's order (``dev``) give the speed (the median of their measured over profiled compute,
    ``run_speed``), and ``run_speed_s`` is each prompt's prediction with its profiled compute scaled by it.  Only
    the other prompts' errors count (``error_stats``): none of them enters its own prediction.  The dev prompts
    alternate with them through the run, so both see the same drift of a shared machine."""
    pos = df["prompt_id"].map({pid: i for i, pid in enumerate(order)})
    out = df.assign(dev=(pos % 2 == 0).to_numpy())
    speed = float(out.loc[out["dev"], "compute_ratio"].median()) if out["dev"].any() else math.nan
    return out.assign(run_speed=speed, run_speed_s=out["predicted_s"] + out["profiled_compute_s"] * (speed - 1.0))


def error_stats(df: pd.DataFrame) -> dict:
    """Mean predicted/measured ratio and mean/median/p90 of |pred - meas| / meas; where the table has them, the median
    measured/profiled compute ratio (``compute_ratio``) and the mean error of the prediction given the prompt's
    measured compute (``given_compute_s``: the profile's compute replaced by the run's; what is left is the model's
    link, exchange and stream terms, apart from the machine's speed on the day); and on the prompts held out of
    ``with_run_speed``'s dev half, the error with the run's own speed (``mean_abs_rel_err_run_speed``) beside the
    profile's on the same prompts (``mean_abs_rel_err_held_out``)."""
    rel = (df["predicted_s"] - df["measured_s"]).abs() / df["measured_s"]
    drift = {"median_compute_ratio": float(df["compute_ratio"].median())} if "compute_ratio" in df else {}
    if "given_compute_s" in df:
        given = (df["given_compute_s"] - df["measured_s"]).abs() / df["measured_s"]
        drift["mean_abs_rel_err_given_compute"] = float(given.mean())
    if "run_speed_s" in df:
        held = df[~df["dev"].astype(bool)]
        rel_held = (held["run_speed_s"] - held["measured_s"]).abs() / held["measured_s"]
        if df["protocol"].nunique() == 1:  # one protocol's speed (the ends differ: no "all")
            drift["run_speed"] = float(df["run_speed"].iloc[0])
        drift |= {"held_out_prompts": int(len(held)),
                  "mean_abs_rel_err_run_speed": float(rel_held.mean()) if len(held) else math.nan,
                  "mean_abs_rel_err_held_out": float(rel[held.index].mean()) if len(held) else math.nan}
    return {"prompts": int(len(df)), "mean_ratio": float((df["predicted_s"] / df["measured_s"]).mean()),
            "mean_abs_rel_err": float(rel.mean()), "median_abs_rel_err": float(rel.median()),
            "p90_abs_rel_err": float(np.quantile(rel, 0.9)) if len(rel) else math.nan} | drift


def prompt_residuals(protocol: str, run: RunData, dep: Deployment) -> pd.DataFrame:
    """Per prompt: what t_e2e_s leaves after the *measured* compute, the ideal link time of the bytes actually
    sent (serialization + one RTT per exchange) and the predicted OPEN (without overhead); and its exchanges."""
    fallback = LinkSpec(**run.link).fixed_csi()
    rounds = run.rounds[protocol]
    meas = run.outputs[protocol].set_index("prompt_id")["t_e2e_s"]
    rows = []
    for pid, g in rounds.groupby("prompt_id", sort=False):
        if pid not in meas:
            continue
        link = 0.0
        for r in g.to_dict("records"):
            c = row_csi(r, fallback)
            link += c.uplink_s(int(r["uplink_bytes"])) + c.downlink_s(int(r["downlink_bytes"]))
            link += int(r["exchanges"]) * c.rtt_ms / 1e3
        compute = float((g["t_draft_s"] + g["t_verify_s"] + g["t_head_s"]).sum())
        first = row_csi(g.iloc[0].to_dict(), fallback)
        opened = open_s(run.prompt_len[pid], first, dep) - dep.exchange_overhead_s
        rows.append({"prompt_id": pid, "residual_s": float(meas[pid]) - compute - link - opened,
                     "exchanges": int(g["exchanges"].sum()) + 1})
    return pd.DataFrame(rows)


def chunk_residuals(protocol: str, run: RunData) -> list[float]:
    """Per chunk after a prompt's first, of a protocol that generates alone: the gap since the previous chunk's
    arrival at the UE less the chunk's passes and its downlink time (server-only: the target's ``t_verify_s`` and
    the chunk's bytes; on-device: the drafter's ``t_draft_s``, no link), s (``fit_chunk_overhead`` takes their
    median)."""
    fallback = LinkSpec(**run.link).fixed_csi()
    edge = describe(protocol).edge_rounds
    out = []
    for _, g in run.rounds[protocol].groupby("prompt_id", sort=False):
        recs = g.sort_values("round").to_dict("records")
        for prev, r in zip(recs, recs[1:]):
            spent = float(r["t_verify_s"]) + row_csi(r, fallback).downlink_s(int(r["downlink_bytes"])) if edge \
                else float(r["t_draft_s"])
            out.append(float(r["t_arrival_s"]) - float(prev["t_arrival_s"]) - spent)
    return out


def start_residuals(protocol: str, run: RunData, dep: Deployment) -> list[float]:
    """Per prompt of a server-only stream: its first chunk's arrival at the UE (from the OPEN) less the model's
    (``stream_s`` of that chunk, the CSI as the chunk recorded it, ``dep``'s start overhead taken out), s
    (``fit_start_overhead`` takes their median)."""
    fallback, d = LinkSpec(**run.link).fixed_csi(), describe(protocol)
    warm = replace(dep, stream_start_overhead_s=0.0)
    out = []
    for pid, g in with_prefix(run.rounds[protocol], run.prompt_len).groupby("prompt_id", sort=False):
        first = g.iloc[0].to_dict()  # with_prefix sorts each prompt's rounds
        k = max(1, int(first["committed"]))  # the first chunk's tokens
        model = alone_s(d, run.prompt_len[pid], k, recorded_csi_at([first], fallback), warm, k)
        out.append(float(first["t_arrival_s"]) - model)
    return out


def run_validate(cfg) -> pd.DataFrame:
    """``--validate RUN_DIR``: validation.csv, validation.png, validation.json in cfg.out; prints the error summary."""
    from testbed.sim import plot as simplot
    from testbed.sim.resolve import PairCache
    from testbed.sim.staleness import check_profile, print_warnings, run_time
    from wisv.timing.calibrate import load_calibration
    from wisv.timing.hardware import LOCAL, LOCAL_PROFILE_PATH, get_profile

    run = load_run(cfg.validate)
    path = Path(cfg.local_profile) if cfg.local_profile else LOCAL_PROFILE_PATH
    profile = get_profile(LOCAL, path)  # a clear error naming the calibrate command when missing
    cal = load_calibration(path)
    check = check_profile(path, run_at=run_time(cfg.validate))
    ex = cfg.exchange_overhead_ms / 1e3 if cfg.exchange_overhead_ms is not None else cal.exchange_overhead_s
    d, t = PairCache(run.drafter, run.target).dims()
    dep = wire_deployment(d, t, cal.for_end("ue"), cal.for_end("edge"), ex, chunk_overhead_s=cal.chunk_overhead_s,
                          ue_chunk_overhead_s=cal.ue_chunk_overhead_s,
                          stream_start_overhead_s=cal.stream_start_overhead_s)
    priced, choosers = predictable(list(run.rounds))
    val = pd.concat([predict_prompts(p, run, dep) for p in priced], ignore_index=True)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    val.to_csv(out / "validation.csv", index=False)
    stats = {p: error_stats(g) for p, g in val.groupby("protocol")} | {"all": error_stats(val)}
    title = f"{Path(cfg.validate).name}: {_link_desc(run.link)}; local profile, {ex * 1e3:.2f} ms/exchange"
    simplot.scatter(val, out / "validation.png", title)
    doc = {"run_dir": str(cfg.validate), "local_profile": str(path), "profile": profile.to_dict(),
           "ends": {e: p.to_dict() for e, p in cal.ends.items()}, "exchange_overhead_s": ex,
           "chunk_overhead_s": cal.chunk_overhead_s, "ue_chunk_overhead_s": cal.ue_chunk_overhead_s,
           "stream_start_overhead_s": cal.stream_start_overhead_s, "link": run.link,
           "stats": stats, "not_predicted": choosers, "profile_check": check.to_dict()}
    (out / "validation.json").write_text(json.dumps(doc, indent=1))
    config.write_config(out, cfg, machine_info())
    print(title)
    print(pd.DataFrame(stats).T.to_string(float_format=lambda v: f"{v:.3f}"))
    if choosers:
        print(f"not predicted: {', '.join(choosers)} (a chooser: the model prices each protocol it chooses among, not "
              "its choices)")
    print(f"wrote {out / 'validation.csv'}, {out / 'validation.png'}, {out / 'validation.json'}")
    print_warnings(check)
    return val


def predictable(protocols: list[str]) -> tuple[list[str], list[str]]:
    """(the run's protocols the model prices, the choosers it does not: ``auto``'s rounds are the edge's alone or a
    speculative round, chosen one by one, as ``testbed.simulate`` leaves it out of its tables) (pure; a run of
    choosers only is refused)."""
    priced = [p for p in protocols if not describe(p).chooses]
    if not priced:
        raise ValueError(f"--validate: the run holds only choosers ({', '.join(protocols)}), which the model does not "
                         "price: run them beside a protocol it does (server, greedy, ...)")
    return priced, [p for p in protocols if describe(p).chooses]


def _link_desc(link: dict) -> str:
    if link.get("csi_trace"):
        return f"trace {link['csi_trace']}"
    rate = link.get("rate_up_mbps") or "unlimited"
    return f"{rate} Mbps, RTT {link.get('rtt_ms', 0):g} ms, PER {link.get('per', 0):g}"
