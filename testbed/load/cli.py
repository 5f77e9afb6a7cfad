"""``python -m testbed.load``: N emulated UEs with mixed token-speed SLOs against one edge, through the link emulator.

    python -m testbed.load --ues 8 --slo-mix 2,4,6,8 --scheduler slo
    python -m testbed.load --sweep 1,2,4,8,16 --scheduler fcfs --out runs/load-fcfs

The UEs live in this process (testbed/load/gen.py): each replays the built-in pair's greedy-SD blocks for its
prompts with an emulated drafting time ``--tau-d-ms`` per token, so N devices cost no drafting compute here.
The edge (``testbed.serve --batch-verify --head none``) verifies for real, with the chosen scheduler.
Writes per N ``requests.csv`` (one row per verified request: t_queue_s, t_verify_s, the SLO budget and whether
it was missed) and ``summary.json``; with ``--sweep``, ``sweep.csv``, the capacity per class (largest N whose
violation rate is <= epsilon), ``violations_vs_n.png`` and the queue-time vs verify-time scatter; last, the
``complete`` marker.  A non-empty ``--out`` is refused unless ``--overwrite``; SIGINT/SIGTERM stop the edge.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import torch
import zmq
from tqdm import tqdm

import config
from protocols.wire import Limits
from testbed.common.files import (
    CONFIG_FILES,
    OutDirError,
    mark_complete,
    prepare_out,
    write_csv_atomic,
    write_json_atomic,
)
from testbed.common.link import LinkSpec, add_rate_flag, apply_rate_flag
from testbed.common.machine import machine_info
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate import placement
from testbed.live.orchestrate.interrupt import guarded
from testbed.load.compare import capacity, mean_sweep
from testbed.load.gen import Device, LoadLoop, Trace
from wisv.decoding.rejection import draft_features
from wisv.decoding.speculative import speculative_generate
from wisv.models.loader import load_pair
from wisv.pairs import PAIR_NAMES, apply_pair
from wisv.records.rows import read_records, to_frame
from wisv.records.summary import summarize_rounds
from wisv.serving.scheduler import LOST_ORDER_CHOICES, SCHEDULER_CHOICES
from wisv.tasks.prompts import prompt_rows

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@dataclass
class LoadConfig:
    """One load test (or a sweep over N)."""

    ues: int = field(default=8, metadata={"min": 1})  # emulated UEs (ignored with --sweep)
    sweep: str = ""  # comma-separated N values (numbers of UEs) for a capacity sweep
    slo_mix: str = "2,4,6,8"  # SLO classes in token/s, dealt to the UEs round-robin
    prompts_per_ue: int = field(default=2, metadata={"min": 1})  # prompts each UE runs, one session after another
    repeats: int = field(default=1, metadata={
        "min": 1})  # run every N this many times (all N, then again) and report the mean per N
    draft_len: int = field(default=8, metadata={"min": 1})  # K, draft tokens per round
    max_new_tokens: int = field(default=160, metadata={"min": 1})  # generation budget per prompt, tokens
    tau_d_ms: float = field(default=20.0, metadata={"min": 0})  # emulated drafting time per token on the device, ms
    stagger_s: float = field(default=0.5, metadata={
        "min": 0})  # UEs open their first sessions evenly spread over this long, s (0: all at once)
    scheduler: str = field(default="slo", metadata={"choices": SCHEDULER_CHOICES})  # edge batch selection
    estimator: str = "results/verify_profile.json"  # verification-time profile for slo (testbed.profile)
    max_batch: int = field(default=16, metadata={"min": 1})  # most requests per verification pass
    guard_ms: float = field(default=0.0, metadata={
        "min": 0})  # slo scheduler's guard time delta, ms (testbed.serve --guard-ms)
    lost_order: str = field(default="last",
                            metadata={"choices": LOST_ORDER_CHOICES})  # slo: lost requests go last or by EDF (paper)
    slack_ms: float | None = None  # slo: batch slack before the earliest feasible deadline, ms (None: the guard)
    arrival_reserve: bool = True  # slo: bound batches for tight arrivals (testbed.serve --[no-]arrival-reserve)
    draft_features: bool = False  # DRAFTs carry the drafter's per-token features (fp16 [K, 3]) for a WDT predictor
    wdt_predictor: str | None = None  # slo: the edge's g_i from this WDT predictor (scripts/train/wdt_predictor.py)
    trace_cache: str | None = None  # JSON of the recorded drafts: read if it matches this run's, else written
    compare_max_batch: int = field(default=0, metadata={
        "min": 0})  # >0: also run the sweep against an edge with this max batch (1: one at a time)
    epsilon: float = field(default=0.1, metadata={
        "min": 0, "max": 1})  # capacity: largest N with violation rate <= epsilon per class
    timeout_s: float = field(default=600.0, metadata={"above": 0})  # give up on a load run after this long, s
    out: str = ""  # output directory; default runs/load-<time>
    overwrite: bool = False  # empty a non-empty --out first (without it, a non-empty --out is refused)
    pair: str | None = field(default=None, metadata={
        "choices": PAIR_NAMES})  # named pair (python -m wisv.pairs build NAME; a plugin's); --drafter/--target win
    target: str | None = None  # local HF target (None: built-in); the drafter must match it
    drafter: str | None = None  # local HF drafter matching the target (None: built-in)
    prompts_file: str | None = None  # JSONL prompts (None: the pair's default set; toy: the built-in test split)
    link: LinkSpec = field(default_factory=LinkSpec)  # emulated link (shared by all UEs)

    def __post_init__(self) -> None:
        if self.scheduler not in SCHEDULER_CHOICES:
            raise ValueError(f"unknown scheduler {self.scheduler!r}; choose one of {SCHEDULER_CHOICES}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")
        if self.slack_ms is not None and self.slack_ms < 0:
            raise ValueError(f"slack_ms must be >= 0 (or left out: the guard), got {self.slack_ms}")
        if self.lost_order not in LOST_ORDER_CHOICES:
            raise ValueError(f"unknown lost-request order {self.lost_order!r}; choose one of {LOST_ORDER_CHOICES}")

    def ns(self) -> list[int]:
        return [int(x) for x in self.sweep.split(",")] if self.sweep else [self.ues]

    def classes(self) -> list[float]:
        return [float(x) for x in self.slo_mix.split(",")]


def make_traces(cfg: LoadConfig, n_prompts: int) -> list[Trace]:
    """Greedy-SD blocks of the first n_prompts prompts of ``cfg.prompts_file`` (None: the toy test split), in-process
    with the same models the edge uses."""
    torch.set_num_threads(1)
    pair = load_pair(cfg.drafter, cfg.target)
    traces = []
    for p in tqdm(prompt_rows(pair.tokenizer, "test", n_prompts, cfg.prompts_file), desc="recording drafts"):
        ids = p["prompt_ids"]
        out = speculative_generate(pair.drafter, pair.target, ids, max_new_tokens=cfg.max_new_tokens,
                                   draft_len=cfg.draft_len)
        rounds = [r for r in out.rounds if r.draft_tokens]  # a last round may draft nothing (one token of budget left)
        feats = block_features(pair.drafter, ids, out.rounds) if cfg.draft_features else None
        traces.append(Trace(p["prompt_id"], ids, [r.draft_tokens for r in rounds], [r.accepted for r in rounds], feats))
    return traces


def cached_traces(cfg: LoadConfig, n_prompts: int) -> list[Trace]:
    """make_traces, through ``--trace-cache`` when given: runs that compare schedulers replay the same drafts."""
    key = {"n": n_prompts, "draft_len": cfg.draft_len, "max_new_tokens": cfg.max_new_tokens, "target": cfg.target,
           "drafter": cfg.drafter, "prompts_file": cfg.prompts_file, "draft_features": cfg.draft_features}
    path = Path(cfg.trace_cache) if cfg.trace_cache else None
    if path is not None and path.is_file():
        doc = json.loads(path.read_text())
        if doc["key"] == key:
            return [Trace(t["prompt_id"], t["prompt_ids"], t["blocks"], t["accepted"],
                          None if t["features"] is None else [np.asarray(f, np.float16) for f in t["features"]])
                    for t in doc["traces"]]
    traces = make_traces(cfg, n_prompts)
    if path is not None:
        rows = [asdict(t) | {"features": None if t.features is None else [f.tolist() for f in t.features]}
                for t in traces]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"key": key, "traces": rows}))
    return traces


def block_features(drafter, prompt_ids: list[int], rounds) -> list[np.ndarray]:
    """Per round that drafted, the drafter's features of its block ([K, 3] fp16: max prob, entropy, margin), from one
    drafter pass over the committed prefix and the block."""
    out, prefix = [], list(prompt_ids)
    for r in rounds:
        if r.draft_tokens:
            ids = torch.tensor([prefix + r.draft_tokens[:-1]])  # [1, L + K - 1]
            with torch.no_grad():
                logits = drafter(ids).logits[0, len(prefix) - 1:]  # [K, V]: position j drafted block[j]
            out.append(draft_features(logits)[:, :3].numpy().astype(np.float16))
        prefix += r.committed
    return out


def active_goodput(df: pd.DataFrame) -> float:
    """Committed tokens/s while every UE is still running: from the run's start until the first UE has its last
    verdict (pure).  The whole-run goodput also counts the tail where the last UEs run almost alone, which a
    scheduler that makes some requests wait (SLO's lost ones) stretches.  NaN without send times."""
    if not len(df) or "t_sent_s" not in df:
        return float("nan")
    done = df["t_sent_s"] + df["t_round_s"]
    end = done.groupby(df["ue_id"]).max().min()
    return float(df.loc[done <= end, "committed"].sum() / end) if end > 0 else float("nan")


def summarize(df: pd.DataFrame, n: int, wall_s: float, errors: list[str]) -> dict:
    """Goodput, violation rate per class, mean WDT and queue/verify times of one load run.

    A request is *infeasible* when its budget (eq. 6) is <= 0 before the edge does anything: its own drafting
    and network time already use up the SLO (e.g. a prompt's short last block over a 20 ms RTT), so no
    scheduler can meet it.  ``violation_rate`` counts every request; ``violation_rate_feasible`` only the others,
    which is what the edge can act on; ``infeasible_rate`` is their share."""
    per_class = df.groupby("slo_tok_s")["violated"].mean() if len(df) else pd.Series(dtype=float)
    feasible = df[df["budget_s"] > 0] if len(df) else df
    per_feasible = feasible.groupby("slo_tok_s")["violated"].mean() if len(feasible) else pd.Series(dtype=float)
    infeasible = (df["budget_s"] <= 0).groupby(df["slo_tok_s"]).mean() if len(df) else pd.Series(dtype=float)
    return {"ues": n, "requests": int(len(df)), "wall_s": wall_s,
            "goodput_tok_s": float(df["committed"].sum() / wall_s) if len(df) else 0.0,
            "goodput_active_tok_s": active_goodput(df),
            "violation_rate": {str(k): float(v) for k, v in per_class.items()},
            "violation_rate_feasible": {str(k): float(v) for k, v in per_feasible.items()},
            "infeasible_rate": {str(k): float(v) for k, v in infeasible.items()},
            "violation_rate_all": float(df["violated"].mean()) if len(df) else float("nan"),
            "wdt_tokens_mean": summarize_rounds(df)["wdt_tokens_per_round"],
            "t_queue_s_mean": float(df["t_queue_s"].mean()) if len(df) else float("nan"),
            "t_verify_s_mean": float(df["t_verify_s"].mean()) if len(df) else float("nan"),
            "errors": errors}


def run_load(cfg: LoadConfig, site: placement.Site, traces: list[Trace], n: int, out: Path) -> dict:
    classes = cfg.classes()
    devices = [Device(f"ue{i}", classes[i % len(classes)],
                      [traces[(i * cfg.prompts_per_ue + j) % len(traces)] for j in range(cfg.prompts_per_ue)])
               for i in range(n)]
    ctx = zmq.Context()
    loop = LoadLoop(ctx, site.connect, devices, cfg.draft_len, cfg.max_new_tokens, cfg.tau_d_ms / 1e3,
                    Limits(vocab_size=1 << 20), t_net0_s=cfg.link.rtt_ms / 1e3)
    t0 = time.perf_counter()
    with tqdm(total=n * cfg.prompts_per_ue, desc=f"{n} UEs", unit="prompt") as bar:
        loop.run(cfg.timeout_s, bar, cfg.stagger_s)
    wall = time.perf_counter() - t0
    ctx.term()
    df = to_frame(r for d in devices for r in d.records)
    out.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(out / "requests.csv", df)
    s = summarize(df, n, wall, [e for d in devices for e in d.errors])
    write_json_atomic(out / "summary.json", s)
    return s


def plots(sweep: pd.DataFrame, classes: list[float], last: pd.DataFrame, out: Path, epsilon: float) -> None:
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for c in classes:
        line, = ax.plot(sweep["ues"], sweep[f"viol_{c:g}"], marker="o", label=f"{c:g} tok/s")
        if f"viol_feasible_{c:g}" in sweep:
            ax.plot(sweep["ues"], sweep[f"viol_feasible_{c:g}"], ls="--", color=line.get_color(), lw=0.9)
    ax.axhline(epsilon, ls=":", color="grey", label=f"epsilon = {epsilon}")
    ax.set(xlabel="UEs", ylabel="SLO violation rate", title="violation rate vs N per class (dashed: feasible requests)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "violations_vs_n.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 4))
    if len(last):  # the largest N may have recorded no request (every UE failed)
        ax.scatter(last["t_verify_s"] * 1e3, last["t_queue_s"] * 1e3, s=6, alpha=0.5)
    ax.set(xlabel="verify time (ms)", ylabel="queue time (ms)", title="queue vs verify time (largest N)")
    fig.tight_layout()
    fig.savefig(out / "queue_vs_verify.png", dpi=110)
    plt.close(fig)


def run(cfg: LoadConfig) -> pd.DataFrame:
    """The sweep (or the single N) against one edge; with ``compare_max_batch`` also against a second edge that
    verifies at most that many requests per pass, in the same run (``batching.csv``)."""
    cfg = apply_pair(cfg)
    out, started = Path(cfg.out or f"runs/load-{time.strftime('%Y%m%d-%H%M%S')}"), time.time()
    prepare_out(out, cfg.overwrite, own=CONFIG_FILES)
    machine = machine_info()
    (out / "config.json").write_text(json.dumps(asdict(cfg) | {"machine": machine}, indent=1))
    config.write_config(out, replace(cfg, out=str(out)), machine, fresh=("out", "overwrite"))
    traces = cached_traces(cfg, max(cfg.ns()) * cfg.prompts_per_ue)
    sweep = finish_sweep(cfg, _sweep(cfg, traces, cfg.max_batch, out), out)
    if cfg.compare_max_batch:
        other = mean_sweep(_sweep(cfg, traces, cfg.compare_max_batch, out / f"max_batch_{cfg.compare_max_batch}"))
        both = pd.concat([sweep.assign(max_batch=cfg.max_batch), other.assign(max_batch=cfg.compare_max_batch)])
        write_csv_atomic(out / "batching.csv", both)
        print(both[["max_batch", "ues", "goodput_tok_s", "t_queue_s_mean"]].to_string(index=False))
    mark_complete(out, started, ["sweep.csv", "capacity.json"])
    return sweep


def _sweep(cfg: LoadConfig, traces: list[Trace], max_batch: int, out: Path) -> pd.DataFrame:
    """Start an edge with this max_batch and run every N of the sweep against it."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with placement.local(cfg, out, ["testbed.serve", *config.to_argv(edge_config(cfg, max_batch))]) as site:
        for rep, n in plan_runs(cfg.ns(), cfg.repeats):
            s = run_load(cfg, site, traces, n, run_dir(out, n, rep, cfg.repeats))
            rows.append(sweep_row(s) | {"repeat": rep})
            print(f"max_batch {max_batch}, N={n}{f' (repeat {rep})' if cfg.repeats > 1 else ''}: "
                  f"goodput {s['goodput_tok_s']:.1f} tok/s, violations "
                  f"{_rates(s['violation_rate'])} (feasible requests: {_rates(s['violation_rate_feasible'])}), "
                  f"WDT {s['wdt_tokens_mean']:.2f}, queue {s['t_queue_s_mean'] * 1e3:.1f} ms, "
                  f"errors {len(s['errors'])}")
    return pd.DataFrame(rows)


def edge_config(cfg: LoadConfig, max_batch: int) -> ServeConfig:
    """The edge of a load run: batched, no decision head, the chosen scheduler (its slo settings only with slo)."""
    edge = ServeConfig(head="none", batch_verify=True, scheduler=cfg.scheduler, max_batch=max_batch,
                       max_draft_len=max(ServeConfig.max_draft_len, cfg.draft_len), target=cfg.target)
    if cfg.scheduler != "slo":
        return edge
    return replace(edge, estimator=cfg.estimator, guard_ms=cfg.guard_ms, lost_order=cfg.lost_order,
                   slack_ms=cfg.slack_ms, arrival_reserve=cfg.arrival_reserve, wdt_predictor=cfg.wdt_predictor)


def sweep_row(s: dict) -> dict:
    """One sweep.csv row from a load run's summary."""
    return {"ues": s["ues"], "goodput_tok_s": s["goodput_tok_s"],
            "goodput_active_tok_s": s.get("goodput_active_tok_s", float("nan")),
            "wdt_tokens_mean": s["wdt_tokens_mean"],
            "t_queue_s_mean": s["t_queue_s_mean"], "errors": len(s["errors"]),
            **{f"viol_{float(k):g}": v for k, v in s["violation_rate"].items()},
            **{f"viol_feasible_{float(k):g}": v for k, v in s["violation_rate_feasible"].items()},
            **{f"infeasible_{float(k):g}": v for k, v in s["infeasible_rate"].items()}}


def plan_runs(ns: list[int], repeats: int) -> list[tuple[int, int]]:
    """(repeat, N) in run order: every N once, then again, so that a slow spell of the machine spreads over all N."""
    return [(rep, n) for rep in range(repeats) for n in ns]


def run_dir(out: Path, n: int, rep: int, repeats: int) -> Path:
    """Where one load run's records go: n<N>, or n<N>-r<repeat> when repeated."""
    return out / (f"n{n}" if repeats == 1 else f"n{n}-r{rep}")


def _rates(rates: dict) -> str:
    return "{" + ", ".join(f"{float(k):g}: {v:.1%}" for k, v in rates.items()) + "}"


def finish_sweep(cfg: LoadConfig, rows: pd.DataFrame, out: Path) -> pd.DataFrame:
    """sweep.csv (the mean per N; every repeat in sweep_repeats.csv), capacity.json (all and feasible requests)
    and the plots of a finished sweep; returns the mean sweep."""
    if cfg.repeats > 1:
        write_csv_atomic(out / "sweep_repeats.csv", rows)
    sweep = mean_sweep(rows)
    write_csv_atomic(out / "sweep.csv", sweep)
    cap = capacity(sweep, cfg.classes(), cfg.epsilon)
    cap_f = capacity(sweep, cfg.classes(), cfg.epsilon, prefix="viol_feasible_")
    write_json_atomic(out / "capacity.json", {"epsilon": cfg.epsilon, "capacity": cap, "capacity_feasible": cap_f})
    last = read_records(run_dir(out, max(cfg.ns()), 0, cfg.repeats) / "requests.csv")
    plots(sweep, cfg.classes(), last, out, cfg.epsilon)
    mean = f" (mean of {cfg.repeats} repeats)" if cfg.repeats > 1 else ""
    print(f"capacity (largest N with violation rate <= {cfg.epsilon}{mean}): {cap}; over feasible requests: "
          f"{cap_f}; results in {out}")
    return sweep


def resummarize(out: Path) -> pd.DataFrame:
    """Rebuild a finished sweep's summaries, sweep.csv, capacity.json and plots from its per-request records."""
    cfg_doc = json.loads((out / "config.json").read_text())
    if (cfg_doc.get("slack_ms") or 0) < 0:  # runs from before slack_ms was optional wrote -1 for "the guard"
        cfg_doc["slack_ms"] = None
    kept = {k: v for k, v in cfg_doc.items() if k not in ("link", "machine")}
    cfg = LoadConfig(**kept, link=LinkSpec(**cfg_doc["link"]))
    rows = []
    for rep, n in plan_runs(cfg.ns(), cfg.repeats):
        d = run_dir(out, n, rep, cfg.repeats)
        old = json.loads((d / "summary.json").read_text())
        s = summarize(read_records(d / "requests.csv"), n, old["wall_s"], old["errors"])
        write_json_atomic(d / "summary.json", s)
        rows.append(sweep_row(s) | {"repeat": rep})
    return finish_sweep(cfg, pd.DataFrame(rows), out)


def parse_args(argv: list[str] | None = None) -> LoadConfig:
    ap = config.add_flags(argparse.ArgumentParser(prog="python -m testbed.load", description=__doc__.splitlines()[0]),
                          LoadConfig)
    add_rate_flag(ap)
    ap.add_argument("--resummarize", metavar="DIR", help="rebuild a finished run's summaries, sweep.csv, capacity.json "
                    "and plots from its per-request records (no load is run)")
    return config.parse(LoadConfig, argv, ap, adjust=apply_rate_flag)


def main(argv: list[str] | None = None) -> None:
    """Run a load test, or with ``--resummarize DIR`` rebuild a finished one's summaries from its records."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--resummarize", type=Path, default=None)
    known, rest = pre.parse_known_args(argv)
    if known.resummarize is not None:
        resummarize(known.resummarize)
        return
    cfg = parse_args(rest)
    try:
        guarded("testbed.load", lambda: run(cfg))
    except OutDirError as e:
        print(f"testbed.load: error: {e}", file=sys.stderr)
        sys.exit(2)
