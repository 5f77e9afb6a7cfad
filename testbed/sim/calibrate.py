"""``python -m testbed.simulate calibrate``: time the pair's forward calls here and fit the ``local`` profile.

Compute: greedy rounds of the in-process loop (``wisv.decoding.sessions``) at several K, with ``idle_gap_ms`` of
sleep before every timed phase.  The gap reproduces the testbed's duty cycle: UE and edge idle while the
link carries their messages, and on a shared VM a core that has idled runs the next few ms markedly
slower (here ~2x: K=8 drafting takes ~7 ms back to back, ~13 ms after a 20 ms idle).  Each drafting run
(K calls) and each verification pass (+ greedy decision + commit, as the edge times it) is one
``CallTiming``.  Then the target's streams: ``stream_lens`` tokens decoded back to back, one 1-row pass each (the
edge's server-only stream: ``protocols.stream``), after the same idle gap.  ``wisv.timing.calibrate.fit_compute``
fits the per-phase and per-call overheads and the FLOP rate over all of them (the record's ``profile``), and
``fit_ends`` once per end on its own model's timings (``ends``: what the simulator reads for the UE and the edge).
The raw timings are written next to the record (``<out>.timings.csv``).

Per-exchange overhead: a short ``testbed.run`` of greedy, server-only and on-device (or ``--link-run DIR``, an
existing run) gives, per greedy prompt, the time left after its measured compute and the ideal link model; the median
per exchange is the fixed cost of the process hops (``wisv.timing.calibrate.fit_exchange_overhead``).  Per-chunk
overhead: from its server-only streams, the gap between two chunks' arrivals less the later one's passes and
downlink time; the median is the edge's host work per chunk (``fit_chunk_overhead``; 0 when the run streamed
nothing).  From its on-device streams, the same gap less the drafter's passes: the UE's host work per chunk.
Stream start: from its server-only prompts, the first chunk's arrival less the model's (OPEN, GENERATE, one pass,
priced warm); the median is what a stream's start costs beyond that (``fit_start_overhead``): the edge's prefill and
first pass run after it idled through the round trips, on this VM markedly slower than back to back.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import config
from testbed.common.machine import machine_info
from testbed.sim.staleness import now_utc
from wisv.decoding.acceptance import greedy_accept_ids
from wisv.decoding.sessions import DraftSession, VerifySession
from wisv.models.loader import load_pair
from wisv.pairs import PAIR_NAMES, apply_pair
from wisv.tasks.prompts import prompt_rows
from wisv.timing.calibrate import (
    END_ROLES,
    Calibration,
    CallTiming,
    ComputeFit,
    fit_chunk_overhead,
    fit_compute,
    fit_ends,
    fit_exchange_overhead,
    fit_start_overhead,
    profile_from_fit,
    save_calibration,
)
from wisv.timing.compute import ModelDims, draft_flops, verify_flops
from wisv.timing.hardware import LOCAL_PROFILE_PATH
from wisv.timing.protodesc import describe
from wisv.timing.roundtime import n_weights

CALIB_SPLIT = "calib"  # the pool calibration times: never the test prompts the runs it prices are measured on


@dataclass
class CalibrateConfig:
    """One calibration (collected into the record's notes)."""

    out: str = str(LOCAL_PROFILE_PATH)  # calibration record to write (get_profile("local") reads it)
    draft_lens: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64], metadata={
        "min": 1, "min_len": 1})  # K values timed, tokens
    prompts: int = field(default=3, metadata={"min": 1})  # calibration prompts whose rounds are timed
    rounds_per_k: int = field(default=10, metadata={
        "min": 1})  # timed rounds per (prompt, K), after one untimed round
    stream_lens: list[int] = field(default_factory=lambda: [1, 4, 16, 48], metadata={
        "min": 1, "min_len": 1})  # target streams timed, tokens each
    streams_per_len: int = field(default=3, metadata={"min": 1})  # timed streams per (prompt, length)
    idle_gap_ms: float = field(default=20.0, metadata={
        "min": 0})  # sleep before each timed call, ms (see the module docstring)
    link_run: str | None = None  # testbed.run directory for the exchange overhead (None: run a short one)
    link_prompts: int = field(default=3, metadata={
        "min": 1})  # prompts of the short testbed run (20 Mbps / 20 ms, greedy and server-only, K = 8)
    no_link: bool = False  # skip the exchange-overhead measurement (writes 0)
    prompts_file: str | None = None  # JSONL prompts to time, not the ones the runs it prices measure (None: the
    #   pair's calibration pool, the built-in calib split: never the test prompts)
    pair: str | None = field(default=None, metadata={
        "choices": PAIR_NAMES})  # named pair (python -m wisv.pairs build NAME; a plugin's); --drafter/--target win
    drafter: str | None = None  # local HF drafter directory (None: built-in)
    target: str | None = None  # local HF target directory (None: built-in)


def calib_rows(tok, cfg: CalibrateConfig, n: int) -> list[dict]:
    """The first ``n`` prompts of the calibration pool (``--prompts-file``, or the pair's ``calib`` pool, or the
    built-in calib split): a profile is never fitted on the test prompts the runs it prices are measured on."""
    return prompt_rows(tok, CALIB_SPLIT, n, cfg.prompts_file)


def write_link_prompts(tok, cfg: CalibrateConfig) -> str:
    """The short link run's prompts from the calibration pool, as a JSONL of token ids next to the record (a
    testbed run reads the test split unless given a file); its path."""
    path = Path(cfg.out).with_suffix(".link_prompts.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = calib_rows(tok, cfg, cfg.link_prompts)
    path.write_text("".join(json.dumps({"prompt_id": r["prompt_id"], "prompt_ids": r["prompt_ids"]}) + "\n"
                            for r in rows))
    return str(path)


def time_rounds(pair, cfg: CalibrateConfig) -> list[CallTiming]:
    """CallTimings of greedy rounds at every K (each prompt's first round, with the drafter's prefill, is untimed)."""
    dims_d, dims_t = ModelDims.from_hf_config(pair.drafter.config), ModelDims.from_hf_config(pair.target.config)
    w_d, w_t = n_weights(dims_d), n_weights(dims_t)
    max_pos = int(getattr(pair.target.config, "max_position_embeddings", 2048))
    gap, out = cfg.idle_gap_ms / 1e3, []
    for k in cfg.draft_lens:
        for row in calib_rows(pair.tokenizer, cfg, cfg.prompts):
            ids = row["prompt_ids"]
            d, v = DraftSession(pair.drafter, ids), VerifySession(pair.target, ids)
            for r in range(cfg.rounds_per_k + 1):
                if len(v.seq) + k + 1 > max_pos:
                    break
                L = len(v.seq)
                time.sleep(gap)
                t0 = time.perf_counter()
                dr = d.draft(k)
                t_draft = time.perf_counter() - t0
                time.sleep(gap)
                t0 = time.perf_counter()
                blk = v.verify(dr.tokens)
                verdict = greedy_accept_ids(torch.tensor(dr.tokens), blk.argmax)
                committed = v.commit(dr.tokens, verdict.n_accepted, verdict.next_token)
                t_verify = time.perf_counter() - t0
                d.commit(committed)
                if r:
                    n = len(dr.tokens)
                    out.append(CallTiming("draft", n, w_d, draft_flops(dims_d, L, n), t_draft, k, L))
                    out.append(CallTiming("verify", 1, w_t, verify_flops(dims_t, L, n), t_verify, k, L, multirow=1))
    return out


def time_streams(pair, cfg: CalibrateConfig) -> list[CallTiming]:
    """CallTimings ("decode") of the target decoding ``stream_lens`` tokens back to back on its KV cache, greedy, one
    1-row pass and commit each (as the edge's server-only stream does), after ``idle_gap_ms`` of sleep."""
    dims_t = ModelDims.from_hf_config(pair.target.config)
    w_t, gap, out = n_weights(dims_t), cfg.idle_gap_ms / 1e3, []
    max_pos = int(getattr(pair.target.config, "max_position_embeddings", 2048))
    for row in calib_rows(pair.tokenizer, cfg, cfg.prompts):
        v = VerifySession(pair.target, row["prompt_ids"])
        _decode(v, 1)  # untimed: the prefill's pass
        for n in [n for n in cfg.stream_lens for _ in range(cfg.streams_per_len)]:
            if len(v.seq) + n + 1 > max_pos:
                break
            L = len(v.seq)
            time.sleep(gap)
            t0 = time.perf_counter()
            _decode(v, n)
            seconds = time.perf_counter() - t0
            out.append(CallTiming("decode", n, w_t, sum(verify_flops(dims_t, L + j, 1) for j in range(n)), seconds,
                                  n, L))
    return out


def _decode(v: VerifySession, n: int) -> None:
    """``n`` greedy tokens of the target, one 1-row pass each (an empty draft: its argmax is the next token)."""
    for _ in range(n):
        blk = v.verify([])
        v.commit([], 0, int(blk.argmax[0]))


def measure_peak_tflops(n: int = 512, seconds: float = 0.5) -> float:
    """Dense float32 matmul throughput of one thread, TFLOP/s (the profile's peak)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.mm(a, b)
        reps += 1
    return 2.0 * n ** 3 * reps / (time.perf_counter() - t0) / 1e12


def medians_by_k(timings: list[CallTiming], fit: ComputeFit, end_fits: dict[str, ComputeFit] | None = None
                 ) -> list[dict]:
    """Measured and predicted median seconds per (role, K): the fit at a glance (and each end's own fit's)."""
    df = pd.DataFrame([asdict(t) for t in timings])
    df["pred"] = [fit.predict_s(t.passes, t.n_weights, t.flops, t.multirow) for t in timings]
    by_role = {r: f for e, f in (end_fits or {}).items() for r in END_ROLES[e]}
    df["pred_end"] = [by_role[t.role].predict_s(t.passes, t.n_weights, t.flops, t.multirow) if t.role in by_role
                      else math.nan
                      for t in timings]
    g = df.groupby(["role", "k"])[["seconds", "pred", "pred_end"]].median().reset_index()
    return [{"role": r.role, "k": int(r.k), "measured_ms": r.seconds * 1e3, "predicted_ms": r.pred * 1e3}
            | ({"end_fit_ms": r.pred_end * 1e3} if end_fits else {}) for r in g.itertuples()]


def exchange_overhead(run_dir: Path, cal: Calibration, dims: tuple[ModelDims, ModelDims],
                      vocab: int) -> tuple[float, dict]:
    """Median per-exchange residual over the prompts of every speculative protocol of a testbed run."""
    from testbed.sim.validate import load_run, prompt_residuals, wire_deployment
    dep = wire_deployment(dims[0], dims[1], cal.for_end("ue"), cal.for_end("edge"), vocab=vocab)
    run = load_run(run_dir)
    res = pd.concat([prompt_residuals(p, run, dep) for p in run.rounds if describe(p).speculative], ignore_index=True)
    ex = fit_exchange_overhead(res["residual_s"].tolist(), res["exchanges"].tolist())
    return ex, {"run": str(run_dir), "prompts": len(res), "protocols": sorted(run.rounds),
                "per_exchange_ms_quartiles": [float(x) * 1e3 for x in
                                              (res["residual_s"] / res["exchanges"]).quantile([0.25, 0.5, 0.75])]}


def streams_on(protocols, end: str) -> list[str]:
    """The protocols that generate alone on ``end`` ("edge": server-only, "ue": on-device), by their descriptions."""
    return [p for p in protocols if not describe(p).speculative and describe(p).edge_rounds == (end == "edge")]


def chunk_overhead(run_dir: Path, end: str = "edge") -> tuple[float, dict]:
    """Median host time per chunk over the streams of a testbed run generated on ``end`` ("edge": server-only's,
    "ue": on-device's; 0 without one)."""
    from testbed.sim.validate import chunk_residuals, load_run
    run = load_run(run_dir)
    streams = streams_on(run.rounds, end)
    res = [r for p in streams for r in chunk_residuals(p, run)]
    if not res:
        return 0.0, {"run": str(run_dir), "chunks": 0, "note": f"no stream generated on the {end} in the run: not "
                                                               "measured"}
    quartiles = [float(x) * 1e3 for x in np.quantile(res, [0.25, 0.5, 0.75])]
    return fit_chunk_overhead(res), {"run": str(run_dir), "chunks": len(res), "protocols": streams,
                                     "per_chunk_ms_quartiles": quartiles}


def start_overhead(run_dir: Path, cal: Calibration, dims: tuple[ModelDims, ModelDims], vocab: int) -> tuple[float,
                                                                                                          dict]:
    """Median start of a server-only stream beyond its warm model over the run's server-only prompts (0 without
    one), priced with ``cal``'s profiles, exchange and chunk overheads."""
    from testbed.sim.validate import load_run, start_residuals, wire_deployment
    run = load_run(run_dir)
    streams = streams_on(run.rounds, "edge")
    if not streams:
        return 0.0, {"run": str(run_dir), "prompts": 0, "note": "no server-only stream in the run: not measured"}
    dep = wire_deployment(dims[0], dims[1], cal.for_end("ue"), cal.for_end("edge"), cal.exchange_overhead_s, vocab,
                          cal.chunk_overhead_s)
    res = [r for p in streams for r in start_residuals(p, run, dep)]
    quartiles = [float(x) * 1e3 for x in np.quantile(res, [0.25, 0.5, 0.75])]
    return fit_start_overhead(res), {"run": str(run_dir), "prompts": len(res), "protocols": streams,
                                     "per_prompt_ms_quartiles": quartiles}


def short_link_run(cfg: CalibrateConfig, prompts_file: str) -> Path:
    """A small testbed.run of greedy, server-only and on-device, interleaved, on an emulated 20 Mbps / 20 ms link,
    over ``prompts_file`` (the calibration pool's); returns its directory."""
    from testbed.common.link import LinkSpec
    from testbed.live.edge.serveconfig import ServeConfig
    from testbed.live.orchestrate.run import RunConfig, run
    from testbed.live.ue.ueconfig import UEConfig
    out = Path("runs") / f"calibrate-link-{time.strftime('%Y%m%d-%H%M%S')}"
    run(RunConfig(protocol="greedy,server,device", interleave=True, prompts=cfg.link_prompts, prompts_file=prompts_file,
                  out=str(out), reference=False,
                  ue=UEConfig(draft_len=8, drafter=cfg.drafter), edge=ServeConfig(head="none", target=cfg.target),
                  link=LinkSpec(20.0, 20.0, 20.0)))
    return out


def calib_source(cfg: CalibrateConfig) -> str:
    """Where the timed prompts came from, for the record's notes."""
    return cfg.prompts_file or f"the built-in {CALIB_SPLIT} split"


def calibrate(cfg: CalibrateConfig) -> Calibration:
    """Time, fit, measure the exchange overhead, write the record and print a summary."""
    torch.set_num_threads(1)
    cfg = apply_pair(cfg, split=CALIB_SPLIT)
    pair = load_pair(cfg.drafter, cfg.target)
    peak = measure_peak_tflops()
    print(f"calibrate: timing K in {cfg.draft_lens} on {cfg.prompts} prompts, {cfg.idle_gap_ms:g} ms idle gaps ...")
    timings = time_rounds(pair, cfg)
    print(f"calibrate: timing the target's streams of {cfg.stream_lens} tokens ...")
    timings += time_streams(pair, cfg)
    fit, ends = fit_compute(timings), fit_ends(timings)
    source = (f"measured on {platform.node()} ({platform.processor() or platform.machine()}, 1 torch thread) by "
              f"testbed.simulate calibrate, {time.strftime('%Y-%m-%d %H:%M')}; peak = float32 matmul")
    notes = {"config": asdict(cfg), "prompts": calib_source(cfg), "by_k": medians_by_k(timings, fit, ends),
             "peak_tflops_measured": peak,
             "machine": machine_info(), "measured_at": now_utc()}  # testbed.sim.staleness compares these
    cal = Calibration(profile_from_fit(fit, peak, source=source), fit=asdict(fit), notes=notes,
                      ends={e: profile_from_fit(f, peak, source=f"{source}; the {e}'s own fit", role=e)
                            for e, f in ends.items()},
                      end_fits={e: asdict(f) for e, f in ends.items()})
    dims = (ModelDims.from_hf_config(pair.drafter.config), ModelDims.from_hf_config(pair.target.config))
    link_prompts = None if cfg.no_link or cfg.link_run else write_link_prompts(pair.tokenizer, cfg)
    del pair
    if not cfg.no_link:
        run_dir = Path(cfg.link_run) if cfg.link_run else short_link_run(cfg, link_prompts)
        cal.exchange_overhead_s, cal.notes["exchange"] = exchange_overhead(run_dir, cal, dims, dims[0].vocab)
        cal.chunk_overhead_s, cal.notes["chunk"] = chunk_overhead(run_dir)
        cal.ue_chunk_overhead_s, cal.notes["ue_chunk"] = chunk_overhead(run_dir, "ue")
        cal.stream_start_overhead_s, cal.notes["stream_start"] = start_overhead(run_dir, cal, dims, dims[0].vocab)
    save_calibration(cal, cfg.out)
    timings_csv = Path(cfg.out).with_suffix(".timings.csv")
    pd.DataFrame([asdict(t) for t in timings]).to_csv(timings_csv, index=False)
    _print(cal, fit, ends)
    print(f"wrote {cfg.out} and {timings_csv} (the raw timings)")
    return cal


def _print(cal: Calibration, fit: ComputeFit, ends: dict[str, ComputeFit]) -> None:
    p = cal.profile
    print(f"fit {_fit_line(fit)}; eta = {p.eta:.3f} of {p.peak_tflops * 1e3:.1f} GFLOP/s; exchange overhead "
          f"{cal.exchange_overhead_s * 1e3:.2f} ms, {cal.chunk_overhead_s * 1e3:.2f} ms a streamed chunk, "
          f"{cal.ue_chunk_overhead_s * 1e3:.2f} ms a chunk on the device, {cal.stream_start_overhead_s * 1e3:.2f} ms "
          "a server-only stream's start")
    for e, f in ends.items():
        print(f"the {e}'s own fit {_fit_line(f)}")
    for r in cal.notes["by_k"]:
        end = f"  its end's fit {r['end_fit_ms']:7.2f} ms" if "end_fit_ms" in r else ""
        print(f"  {r['role']:6s} K={r['k']:3d}  measured {r['measured_ms']:7.2f} ms  "
              f"predicted {r['predicted_ms']:7.2f} ms{end}")


def _fit_line(f: ComputeFit) -> str:
    """A fit's coefficients and errors, one line."""
    return (f"on {f.n_used}/{f.n_total} phases: {f.phase_overhead_s * 1e3:.3f} ms/phase + "
            f"{f.pass_overhead_s * 1e3:.3f} ms/call + {f.weight_read_s * 1e9:.3f} ns/weight/call + "
            f"{f.multirow_overhead_s * 1e3:.3f} ms/multi-row call + FLOPs / {f.flops_per_s / 1e9:.1f} GFLOP/s "
            f"(|rel err| median {f.rel_err_median:.1%}, p90 {f.rel_err_p90:.1%})")


def parse_args(argv: list[str] | None = None) -> CalibrateConfig:
    ap = argparse.ArgumentParser(prog="python -m testbed.simulate calibrate", description=__doc__.splitlines()[0])
    return config.parse(CalibrateConfig, argv, config.add_flags(ap, CalibrateConfig))


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    if config.run_reporting("python -m testbed.simulate calibrate", lambda: calibrate(cfg)):
        sys.exit(2)

