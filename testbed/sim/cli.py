"""Trace-driven simulator: the built-in pair's acceptance traces + the latency model -> Table I and Fig. 4.

Usage::

    python -m testbed.simulate --arch-drafter llama-3.2-1b --arch-target llama-3.1-8b --out results/simulate
    python -m testbed.simulate calibrate --out results/local_profile.json   # measure the `local` profile
    python -m testbed.simulate --validate RUN_DIR --out DIR                  # predicted vs measured testbed run

Acceptance (AAL, rounds, accuracy) always comes from running the in-process speculative loop on the
built-in (or given) pair, once per (prompt, K, rule), cached under ``--cache-dir``.  Latency and
throughput come from the latency model (``wisv.roundtime``, eqs. 3-22) applied to every recorded round,
with payload sizes and FLOPs from the pair's own dimensions or from named architectures
(``--arch-drafter/--arch-target``), on the ``--ue-profile``/``--edge-profile`` hardware.
Methods: ``greedy`` (greedy traces), ``reject`` (speculative-sampling traces), ``fh``/``sh`` (WISV traces
with the decision head; without a head, lossless FH/SH on greedy traces).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from protocols.registry import ROUND_PROTOCOLS, WISV_PROTOCOLS
from testbed.sim import plot as simplot
from testbed.sim.model import prompt_latencies, summarize
from testbed.sim.resolve import Head, Link, PairCache, deployment, links_of, resolve_head
from testbed.sim.traces import TraceKey, cached_trace, generate_trace
from testbed.sim.trends import format_trends, trends

METHODS = ROUND_PROTOCOLS  # the simulator models every protocol a round can use
RULE = {"greedy": "greedy", "reject": "sampling"}  # fh / sh: "wisv" with a head, else "greedy"


@dataclass
class SimConfig:
    """One simulation or validation (written to config.json next to the results)."""

    out: str = "results/simulate"  # output directory
    methods: list[str] = field(default_factory=lambda: list(METHODS))  # greedy | reject | fh | sh
    draft_lens: list[int] = field(default_factory=lambda: [10, 16, 24, 32, 64])  # draft windows K
    rates_mbps: list[float] = field(default_factory=lambda: [20.0, 500.0])  # symmetric link rates, Mbit/s
    rtts_ms: list[float] = field(default_factory=lambda: [5.0, 50.0])  # round-trip times, ms
    per: float = 0.0  # packet error rate of each direction
    csi_trace: str | None = None  # CSV trace (channel/trace.py); replaces the rate x RTT grid
    prompts: int = 20  # first N problems of the built-in test split
    max_new_tokens: int = 160  # budget per prompt
    ue_profile: str = "jetson-agx-orin"  # drafting device (wisv.hardware; "local" = measured)
    edge_profile: str = "a40"  # verifying device
    local_profile: str | None = None  # calibration record for "local" (default results/local_profile.json)
    arch_drafter: str | None = None  # named drafter architecture for payloads/FLOPs (None: the pair's own)
    arch_target: str | None = None  # named target architecture (give both or neither)
    payload: str = "paper"  # payload encoding: paper (ceil(log2 V)-bit ids) | wire (this testbed's format)
    exchange_overhead_ms: float | None = None  # fixed time per exchange, ms (None: calibrated if both local, else 0)
    head: str = "default"  # decision head for fh/sh: default | none | PATH
    tau: float | None = None  # head threshold (None: the head's own)
    seed: int = 0  # reject's sampling seed base
    temperature: float = 1.0  # reject's sampling temperature
    cache_dir: str = "runs/sim-cache"  # acceptance-trace cache
    drafter: str | None = None  # local HF drafter directory (None: built-in)
    target: str | None = None  # local HF target directory (None: built-in)
    validate: str | None = None  # testbed.run directory: validation mode


def run(cfg: SimConfig) -> pd.DataFrame:
    """Simulate every (method, K, link); write table.csv, fig4.png and config.json; return the table."""
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
    acc_from = f"acceptance traces of the {pair.name} pair ({cfg.prompts} test prompts, in-process loop)"
    timing_from = f"latency model with {resolved['dims']} dims on {dep.ue.name} (UE) / {dep.edge.name} (edge)"
    rows = []
    for k in cfg.draft_lens:
        for method in cfg.methods:
            for link in links:
                trace, rule = _trace(cfg, pair, head, method, k, link)
                per_prompt = prompt_latencies(trace, method, link.csi_at, dep)
                rows.append({"method": _label(method, rule), "protocol": method, "acceptance": rule, "draft_len": k,
                             "link": link.name, "rate_mbps": link.rate_mbps, "rtt_ms": link.rtt_ms, "per": link.per,
                             **summarize(trace, per_prompt), "acceptance_from": acc_from, "timing_from": timing_from})
    table = pd.DataFrame(rows)
    table.to_csv(out / "table.csv", index=False)
    simplot.fig4(table, out / "fig4.png", title=timing_from)
    (out / "config.json").write_text(json.dumps(asdict(cfg) | {"resolved": resolved | {"head": head.desc}}, indent=1))
    found = trends(table)
    (out / "trends.json").write_text(json.dumps({"acceptance_from": acc_from, "timing_from": timing_from,
                                                  "trends": [t.to_dict() for t in found]}, indent=1))
    _print(table, acc_from, timing_from, head.desc, out)
    if found:
        print("\nTable I / Fig. 4 trends (latency from the model; acceptance from the pair's traces):")
        print(format_trends(found))
    return table


def _trace(cfg: SimConfig, pair: PairCache, head: Head, method: str, k: int, link: Link) -> tuple[pd.DataFrame, str]:
    """The (cached) acceptance trace of one method at one K (WISV traces depend on the link the head sees)."""
    rule = RULE.get(method) or ("wisv" if head.policy is not None else "greedy")
    key = TraceKey(pair.id, rule, k, cfg.prompts, cfg.max_new_tokens)
    policy, csi, layer = None, None, -1
    if rule == "sampling":
        key = TraceKey(pair.id, rule, k, cfg.prompts, cfg.max_new_tokens, seed=cfg.seed, temperature=cfg.temperature)
    elif rule == "wisv":
        csi = link.head_csi
        key = TraceKey(pair.id, rule, k, cfg.prompts, cfg.max_new_tokens, head=head.id, tau=head.tau,
                       csi=tuple(csi.to_dict().values()))
        policy, layer = head.policy, head.policy.cfg.hidden_layer
    trace, _ = cached_trace(Path(cfg.cache_dir), key, lambda: generate_trace(pair.get(), key, policy, csi, layer))
    return trace, rule


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
    d = SimConfig()
    ap = argparse.ArgumentParser(prog="python -m testbed.simulate", description=__doc__.splitlines()[0],
                                 epilog="python -m testbed.simulate calibrate --help: the local-profile calibration")
    ap.add_argument("--out", default=d.out)
    ap.add_argument("--methods", type=_strs, default=d.methods, help="comma-separated: greedy,reject,fh,sh")
    ap.add_argument("--draft-lens", type=_ints, default=d.draft_lens, help="comma-separated draft windows K")
    ap.add_argument("--rates-mbps", type=_floats, default=d.rates_mbps, help="comma-separated link rates, Mbit/s")
    ap.add_argument("--rtts-ms", type=_floats, default=d.rtts_ms, help="comma-separated RTTs, ms")
    ap.add_argument("--per", type=float, default=d.per, help="packet error rate of each direction")
    ap.add_argument("--csi-trace", default=None, help="CSV CSI trace (replaces --rates-mbps x --rtts-ms)")
    ap.add_argument("--prompts", type=int, default=d.prompts)
    ap.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    ap.add_argument("--ue-profile", default=d.ue_profile, help="hardware profile name or 'local'")
    ap.add_argument("--edge-profile", default=d.edge_profile, help="hardware profile name or 'local'")
    ap.add_argument("--local-profile", default=None, help="calibration record of the 'local' profile")
    ap.add_argument("--arch-drafter", default=None, help="named architecture (wisv.compute.ARCHITECTURES)")
    ap.add_argument("--arch-target", default=None, help="named architecture (wisv.compute.ARCHITECTURES)")
    ap.add_argument("--payload", default=d.payload, choices=["paper", "wire"])
    ap.add_argument("--exchange-overhead-ms", type=float, default=None)
    ap.add_argument("--head", default=d.head, help="decision head for fh/sh: default | none | PATH")
    ap.add_argument("--tau", type=float, default=None)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--temperature", type=float, default=d.temperature)
    ap.add_argument("--cache-dir", default=d.cache_dir)
    ap.add_argument("--drafter", default=None)
    ap.add_argument("--target", default=None)
    ap.add_argument("--validate", default=None, metavar="RUN_DIR", help="validate against a testbed.run directory")
    return SimConfig(**vars(ap.parse_args(argv)))


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()]


def _floats(s: str) -> list[float]:
    return [float(x) for x in s.split(",") if x.strip()]


def _strs(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["calibrate"]:
        from testbed.sim.calibrate import main as calibrate_main
        calibrate_main(argv[1:])
        return
    run(parse_args(argv))
