"""Trace-driven simulator: the built-in pair's acceptance traces + the latency model -> Table I and Fig. 4.

Usage::

    python -m testbed.simulate --arch-drafter llama-3.2-1b --arch-target llama-3.1-8b --out runs/simulate
    python -m testbed.simulate calibrate --out results/local_profile.json   # measure the `local` profile
    python -m testbed.simulate --validate RUN_DIR --out DIR                  # predicted vs measured testbed run

Acceptance (AAL, rounds, accuracy) always comes from running the in-process speculative loop on the
built-in (or given) pair, once per (prompt, K, rule), cached under ``--cache-dir``.  Latency and
throughput come from the latency model (``wisv.timing.roundtime``, eqs. 3-22) applied to every recorded round,
with payload sizes and FLOPs from the pair's own dimensions or from named architectures
(``--arch-drafter/--arch-target``), on the ``--ue-profile``/``--edge-profile`` hardware.
Methods: ``server`` and ``device`` (the target or the drafter alone, wisv.timing.alone: output lengths from the
greedy traces, the target's; the drafter's own are not traced, so on-device is timed over the target's length),
``greedy`` (greedy traces), ``reject`` (speculative-sampling traces), ``fh``/``sh`` (WISV traces
with the decision head; without a head, lossless FH/SH on greedy traces), ``tree`` (tree traces: a best-first
draft tree of K tokens per round, wisv/decoding/treespec.py; K parent indices on the uplink).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pandas as pd

import config
from protocols.registry import ROUND_PROTOCOLS, WISV_PROTOCOLS
from testbed.common.machine import machine_info
from testbed.sim import plot as simplot
from testbed.sim.model import alone_latencies, prompt_latencies, summarize
from testbed.sim.resolve import Head, Link, PairCache, deployment, links_of, resolve_head
from testbed.sim.staleness import check_profile, print_warnings
from testbed.sim.traces import TraceKey, cached_trace, generate_trace, trace_rule
from testbed.sim.trends import format_trends, trends
from wisv.head.store import PLUGIN_KINDS
from wisv.pairs import PAIR_NAMES, apply_pair
from wisv.tasks.datasets import check_dataset
from wisv.tasks.prompts import CHAT_TEMPLATE_MODES
from wisv.timing.hardware import LOCAL, LOCAL_PROFILE_PATH
from wisv.timing.protodesc import alone_names, describe
from wisv.timing.window import AUTO_DRAFT_LEN

METHODS = ROUND_PROTOCOLS + alone_names()  # every protocol a round can use, and the models generating alone


def parse_draft_lens(tokens: list[str]) -> list[int]:
    """--draft-lens: numbers of tokens and/or ``auto`` (stored as AUTO_DRAFT_LEN, 0), comma- or space-separated."""
    out = []
    for tok in (t.strip() for raw in tokens for t in str(raw).split(",") if t.strip()):
        if tok.lower() == "auto":
            out.append(AUTO_DRAFT_LEN)
        elif tok.isdigit() and int(tok) >= 1:
            out.append(int(tok))
        else:
            raise config.ConfigError(f"--draft-lens: expected numbers of tokens (>= 1) or auto, got {tok!r}")
    if not out:
        raise config.ConfigError("--draft-lens: give at least one window")
    return out


DRAFT_LENS_TEXT = {"parse": parse_draft_lens, "format": lambda ks: [
    "auto" if k == AUTO_DRAFT_LEN else str(k) for k in ks]}  # --draft-lens 8 16 auto


@dataclass
class SimConfig:
    """One simulation or validation (written to config.json next to the results)."""

    out: str = "runs/simulate"  # output directory (the committed runs: results/simulate)
    methods: list[str] = field(default_factory=lambda: list(METHODS), metadata={"choices": METHODS})  # methods
    draft_lens: list[int] = field(default_factory=lambda: [10, 16, 24, 32, 64], metadata={  # draft windows K, tokens;
        **DRAFT_LENS_TEXT, "example": [8, AUTO_DRAFT_LEN]})  # auto: the per-round window policy
    window_ks: list[int] = field(default_factory=lambda: [4, 8, 16, 32])  # auto: fixed K compared, oracle's choices
    window_k_max: int = 32  # auto: the largest K it may choose, tokens
    window_passes: int = 1  # auto: run the prompt set this many times back to back (to span a long trace)
    rates_mbps: list[float] = field(default_factory=lambda: [20.0, 500.0])  # symmetric link rates, Mbit/s
    rtts_ms: list[float] = field(default_factory=lambda: [5.0, 50.0])  # round-trip times, ms
    per: float = 0.0  # packet error rate of each direction, [0, 1)
    csi_trace: str | None = None  # CSV CSI trace (channel/csitrace.py); replaces the rate x RTT grid
    prompts: int = 20  # first N prompts of the prompt set
    prompts_file: str | None = None  # JSONL prompts with answers (None: the pair's default; toy: built-in split)
    dataset: str | None = None  # a named set instead, first turns, every row with an answer: gsm8k |
    #   spec-bench:math_reasoning (docs/datasets.md)
    chat_template: str = field(default="auto", metadata={
        "choices": CHAT_TEMPLATE_MODES})  # prompt text through the tokenizer's chat template (auto: if it has one)
    max_new_tokens: int = 160  # generation budget per prompt, tokens
    stream_every_tokens: int | None = field(default=None, metadata={"min": 1})  # server-only and on-device: a chunk
    #   of the stream ends at this many tokens (testbed.run's flag; None: every token a chunk)
    ue_profile: str = "jetson-agx-orin"  # drafting device: hardware profile name (wisv.timing.hardware) or local
    edge_profile: str = "a40"  # verifying device: hardware profile name (wisv.timing.hardware) or local
    local_profile: str | None = None  # calibration record for "local" (None: results/local_profile.json)
    arch_drafter: str | None = None  # named drafter architecture (wisv.timing.compute.ARCHITECTURES) for payloads/FLOPs
    arch_target: str | None = None  # named target architecture (give both or neither; None: the pair's own)
    payload: str = field(default="paper", metadata={"choices": ("paper", "wire")})  # paper: ceil(log2 V)-bit ids
    target_features: int = field(default=0, metadata={  # target-feature rows each VERDICT carries down, rows
        "min": 0})  # (the feature drafter's; 0: none)
    exchange_overhead_ms: float | None = None  # fixed time per exchange, ms (None: calibrated if both local, else 0)
    head: str = field(default="default", metadata={  # decision head for fh/sh/ef:
        "also": PLUGIN_KINDS})  # default | wisv-paper | a judge shipped for the pair | none | PATH
    tau: float | None = None  # head threshold (None: the head's own)
    seed: int = 0  # reject's sampling seed base
    temperature: float = 1.0  # reject's sampling temperature
    cache_dir: str = "runs/sim-cache"  # acceptance-trace cache directory
    pair: str | None = field(default=None, metadata={
        "choices": PAIR_NAMES})  # named pair (python -m wisv.pairs build NAME; a plugin's); --drafter/--target win
    drafter: str | None = None  # local HF drafter directory (None: built-in)
    target: str | None = None  # local HF target directory (None: built-in)
    validate: str | None = None  # testbed.run directory: predict it and compare with what it measured
    calibrate: bool = False  # calibrate the local profile (into local_profile) first, in this command (minutes)


def run(cfg: SimConfig) -> pd.DataFrame:
    """Simulate every (method, K, link); write table.csv, fig4.png and config.json; return the table."""
    if cfg.dataset:
        check_dataset(cfg.dataset, cfg.prompts_file, need_answers=True)  # before anything is computed or written
    cfg = apply_pair(cfg)
    if cfg.calibrate:
        calibrate_first(cfg)
    if cfg.validate:
        from testbed.sim.validate import run_validate
        return run_validate(cfg)
    bad = sorted(set(cfg.methods) - set(METHODS))
    if bad:
        raise ValueError(f"unknown methods {bad}; known: {list(METHODS)}")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    pair = PairCache(cfg.drafter, cfg.target)
    head = resolve_head(cfg.head, cfg.tau, pair)
    dep, resolved = deployment(cfg, pair, head)
    links = links_of(cfg)
    if AUTO_DRAFT_LEN in cfg.draft_lens:
        from testbed.sim.window import run_window
        window = run_window(cfg, pair, dep, links, head.policy, out)
        if not [k for k in cfg.draft_lens if k != AUTO_DRAFT_LEN]:
            config.write_config(out, cfg, machine_info() | {"resolved": resolved | {"head": head.desc}})
            return window
    prompt_set = cfg.dataset or (Path(cfg.prompts_file).name if cfg.prompts_file else "toy test split")
    acc_from = f"acceptance traces of the {pair.name} pair ({cfg.prompts} prompts of {prompt_set}, in-process loop)"
    timing_from = f"latency model with {resolved['dims']} dims on {dep.ue.name} (UE) / {dep.edge.name} (edge)"
    rows = []
    for k in (k for k in cfg.draft_lens if k != AUTO_DRAFT_LEN):
        for method in cfg.methods:
            for link in links:
                trace, rule = _trace(cfg, pair, head, method, k, link)
                d = describe(method)
                per_prompt = (prompt_latencies(trace, method, link.csi_at, dep, outages=link.outages)
                              if d.speculative else alone_latencies(trace, d, link.csi_at, dep, outages=link.outages,
                                                                 chunk_tokens=cfg.stream_every_tokens or 1))
                rows.append({"method": _label(method, rule), "protocol": method, "acceptance": rule, "draft_len": k,
                             "link": link.name, "rate_mbps": link.rate_mbps, "rtt_ms": link.rtt_ms, "per": link.per,
                             **summarize(trace, per_prompt), **_alone_fields(d, per_prompt),
                             "acceptance_from": acc_from, "timing_from": timing_from})
    table = pd.DataFrame(rows)
    table.to_csv(out / "table.csv", index=False)
    simplot.fig4(table, out / "fig4.png", title=timing_from)
    uses_local = LOCAL in (cfg.ue_profile, cfg.edge_profile)
    check = check_profile(cfg.local_profile or LOCAL_PROFILE_PATH) if uses_local else None
    machine = machine_info()
    (out / "config.json").write_text(json.dumps(asdict(cfg) | {"resolved": resolved | {"head": head.desc},
                                                               "machine": machine,
                                                               "profile_check": check and check.to_dict()}, indent=1))
    config.write_config(out, cfg, machine)
    found = trends(table)
    (out / "trends.json").write_text(json.dumps({"acceptance_from": acc_from, "timing_from": timing_from,
                                                  "trends": [t.to_dict() for t in found]}, indent=1))
    _print(table, acc_from, timing_from, head.desc, out)
    if found:
        print("\nTable I / Fig. 4 trends (latency from the model; acceptance from the pair's traces):")
        print(format_trends(found))
    if check:
        print_warnings(check)
    return table


def calibrate_first(cfg: SimConfig) -> None:
    """--calibrate: measure the local profile now, for the pair simulated (or the validated run's pair)."""
    from testbed.sim.calibrate import CalibrateConfig, calibrate
    if not cfg.validate and LOCAL not in (cfg.ue_profile, cfg.edge_profile):
        raise ValueError("--calibrate measures the 'local' profile: use it (--ue-profile/--edge-profile local) "
                         "or --validate RUN_DIR")
    drafter, target = cfg.drafter, cfg.target
    if cfg.validate:
        from testbed.sim.validate import load_run
        run_data = load_run(cfg.validate)
        drafter, target = run_data.drafter, run_data.target
    calibrate(CalibrateConfig(out=cfg.local_profile or str(LOCAL_PROFILE_PATH), drafter=drafter, target=target))


def _trace(cfg: SimConfig, pair: PairCache, head: Head, method: str, k: int, link: Link) -> tuple[pd.DataFrame, str]:
    """The (cached) acceptance trace of one method at one K (WISV traces depend on the link the head sees)."""
    rule = trace_rule(describe(method), head.policy is not None)
    key = TraceKey(pair.id, rule, k, cfg.prompts, cfg.max_new_tokens, chat_template=cfg.chat_template,
                   prompts_file=cfg.prompts_file or "", dataset=cfg.dataset or "")
    policy, csi, layer = None, None, -1
    if rule == "sampling":
        key = replace(key, seed=cfg.seed, temperature=cfg.temperature)
    elif rule == "wisv":
        csi = link.head_csi
        key = replace(key, head=head.id, tau=head.tau, csi=tuple(csi.to_dict().values()))
        policy, layer = head.policy, head.policy.hidden_layer  # a judge reads the final layer
    trace, _ = cached_trace(Path(cfg.cache_dir), key, lambda: generate_trace(pair.get(), key, policy, csi, layer))
    return trace, rule


def _alone_fields(d, per_prompt: pd.DataFrame) -> dict:
    """A model generating alone drafts nothing (AAL 0) and streams one token per chunk (a round each)."""
    return {} if d.speculative else {"aal": 0.0, "rounds_per_prompt": float(per_prompt["n_tokens"].mean())}


def _label(method: str, rule: str) -> str:
    if method in WISV_PROTOCOLS:
        return f"WISV-{method.upper()}" if rule == "wisv" else f"{method.upper()} (lossless)"
    return method


def _print(table: pd.DataFrame, acc_from: str, timing_from: str, head_desc: str, out: Path) -> None:
    print(f"aal, rounds_per_prompt, accuracy: {acc_from}")
    print(f"latency_s, throughput_tok_s: {timing_from}")
    print(f"decision head: {head_desc}")
    for link, g in table.groupby("link", sort=False):
        print(f"\n{link}: latency per prompt (s) by draft window K")
        print(g.pivot_table(index="method", columns="draft_len", values="latency_s", sort=False).to_string(
            float_format=lambda v: f"{v:.3f}"))
    cols = ["method", "draft_len", "link", "latency_s", "aal", "rounds_per_prompt", "throughput_tok_s", "accuracy"]
    print("\n" + table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"\nwrote {out / 'table.csv'}, {out / 'fig4.png'}, {out / 'trends.json'}, {out / 'config.json'}")


def parse_args(argv: list[str] | None = None) -> SimConfig:
    ap = argparse.ArgumentParser(prog="python -m testbed.simulate", description=__doc__.splitlines()[0],
                                 epilog="python -m testbed.simulate calibrate --help: the local-profile calibration")
    return config.parse(SimConfig, argv, config.add_flags(ap, SimConfig))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["calibrate"]:
        from testbed.sim.calibrate import main as calibrate_main
        calibrate_main(argv[1:])
        return
    cfg = parse_args(argv)
    if config.run_reporting("python -m testbed.simulate", lambda: run(cfg)):
        sys.exit(2)
