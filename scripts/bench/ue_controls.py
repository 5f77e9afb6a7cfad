"""Benchmark the UE-side controls on the built-in pair: WISP's rejection predictor and SpecEdge's proactive drafting.

Usage: ``python -m scripts.bench.ue_controls [--prompts 20] [--out runs/ue_controls.json]``.
Runs ``testbed.run`` (greedy, ``--head none``) in pairs that differ in one flag, each pair ``--repeats`` times
(off, on, off, on, ...: slow drifts of this machine's speed hit both sides), and checks the medians:

- predictor off/on at K_max = ``--k-max`` (default 16): passes when WDT per round falls by >= 25% and
  throughput (goodput) is not lower;
- proactive drafting off/on (``--proactive K``) at each RTT in ``--rtts-ms`` (default 20, 50): passes when the
  mean latency per generated token is lower and the output is still target-only greedy (matches_target 1.0).

Writes one JSON with every run's summary, its config and the checks; exits 0 even when a check fails.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import config
from testbed.common.link import LinkSpec
from testbed.common.machine import machine_info

WDT_CUT = 0.25  # predictor: WDT per round must fall by at least this fraction


@dataclass
class ControlsConfig:
    """One benchmark (written into the JSON)."""

    out: str = "runs/ue_controls.json"  # the JSON, its config.toml beside it (committed: results/ue_controls.json)
    prompts: int = 20  # prompts per run
    k_max: int = 16  # predictor runs: K_max
    draft_len: int = 8  # proactive runs: K
    rtts_ms: list[float] = field(default_factory=lambda: [20.0, 50.0])  # proactive runs: link RTTs, ms
    predictor: str = "results/rejection_predictor.safetensors"  # scripts/train/rejection_predictor.py writes it
    threshold: float | None = None  # p(rejected) that stops drafting (None: the predictor's own operating point)
    runs_dir: str = "runs/ue-controls"  # where the testbed runs write their results
    repeats: int = 3  # off/on pairs per comparison, interleaved; the checks use the medians

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")


def median(runs: list[dict], key) -> float:
    """The median over repeated runs of one summary value (``key``: a field name or a function of the summary)."""
    return statistics.median(r[key] if isinstance(key, str) else key(r) for r in runs)


def predictor_check(off: list[dict], on: list[dict]) -> dict:
    """Median WDT per round falls by >= WDT_CUT at equal or better median throughput (pure).  Half the range of
    the off runs is reported beside it (``goodput_noise_tok_s``) as the measurement's noise."""
    w_off, w_on = median(off, "wdt_tokens_per_round"), median(on, "wdt_tokens_per_round")
    g_off, g_on = median(off, "throughput_tok_s"), median(on, "throughput_tok_s")
    offs = [r["throughput_tok_s"] for r in off]
    noise = (max(offs) - min(offs)) / 2
    cut = 1 - w_on / w_off if w_off else 0.0
    return {"wdt_off": w_off, "wdt_on": w_on, "wdt_cut": cut, "goodput_off": g_off, "goodput_on": g_on,
            "goodput_off_runs": offs, "goodput_on_runs": [r["throughput_tok_s"] for r in on],
            "goodput_noise_tok_s": noise, "goodput_higher": bool(g_on >= g_off),
            "pass": bool(cut >= WDT_CUT and g_on >= g_off)}


def per_token_s(s: dict) -> float:
    """Mean end-to-end latency per generated token of a run summary, s."""
    return s["latency_s"] * s["prompts"] / s["generated_tokens"]


def proactive_check(off: list[dict], on: list[dict], rtt_ms: float) -> dict:
    """Lower median latency per token with proactive drafting, every output still greedy (pure)."""
    a, b = median(off, per_token_s), median(on, per_token_s)
    match = min((r.get("matches_target") or 0.0) for r in on)
    return {"rtt_ms": rtt_ms, "per_token_ms_off": a * 1e3, "per_token_ms_on": b * 1e3, "speedup": a / b,
            "per_token_ms_off_runs": [per_token_s(r) * 1e3 for r in off],
            "per_token_ms_on_runs": [per_token_s(r) * 1e3 for r in on],
            "matches_target_on": match, "pass": bool(b < a and match == 1.0)}


def _run(rc, name: str) -> dict:
    from testbed.live.orchestrate.run import run
    (summary,) = run(replace(rc, out=str(Path(rc.out) / name)))
    return summary | {"config": rc.flat()}


def _pairs(off_cfg, on_cfg, name: str, repeats: int, runs: dict) -> tuple[list[dict], list[dict]]:
    """Run off, on, off, on, ... ``repeats`` times; record each summary in ``runs``; (offs, ons)."""
    offs, ons = [], []
    for i in range(repeats):
        tag = f"_r{i}" if repeats > 1 else ""
        for side, rc, out in (("off", off_cfg, offs), ("on", on_cfg, ons)):
            runs[f"{name}_{side}{tag}"] = summary = _run(rc, f"{name}_{side}{tag}")
            out.append(summary)
    return offs, ons


def run(cfg: ControlsConfig) -> dict:
    from testbed.live.edge.serveconfig import ServeConfig
    from testbed.live.orchestrate.run import RunConfig
    from testbed.live.ue.ueconfig import UEConfig
    base = RunConfig(protocol="greedy", prompts=cfg.prompts, edge=ServeConfig(head="none"), out=cfg.runs_dir,
                     overwrite=True)  # the script's own run directories: a re-run replaces them
    k = replace(base, ue=UEConfig(draft_len=cfg.k_max), reference=False)
    runs: dict = {}
    on = replace(k, ue=replace(k.ue, rejection_predictor=cfg.predictor, rejection_threshold=cfg.threshold))
    checks = {"predictor": predictor_check(*_pairs(k, on, "rp", cfg.repeats, runs)), "proactive": []}
    for rtt in cfg.rtts_ms:
        p = replace(base, ue=UEConfig(draft_len=cfg.draft_len), link=replace(LinkSpec(), rtt_ms=rtt))
        pair = _pairs(p, replace(p, ue=replace(p.ue, proactive=cfg.draft_len)), f"pro_rtt{rtt:g}", cfg.repeats, runs)
        checks["proactive"].append(proactive_check(*pair, rtt))
    doc = {"config": asdict(cfg), "machine": machine_info(), "runs": runs, "checks": checks}
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(doc, indent=1, default=str))
    Path(cfg.out).with_suffix(".config.toml").write_text(config.to_toml(cfg, doc["machine"]))
    _print(checks)
    return doc


def _runs(values: list[float]) -> str:
    return "/".join(f"{v:.1f}" for v in values)


def _print(checks: dict) -> None:
    p = checks["predictor"]
    print(f"predictor: WDT/round {p['wdt_off']:.2f} -> {p['wdt_on']:.2f} (-{p['wdt_cut']:.0%}), goodput "
          f"{p['goodput_off']:.1f} -> {p['goodput_on']:.1f} tok/s (medians; runs {_runs(p['goodput_off_runs'])} -> "
          f"{_runs(p['goodput_on_runs'])}; off runs' noise +-{p['goodput_noise_tok_s']:.1f}): "
          f"{'pass' if p['pass'] else 'FAIL'}")
    for c in checks["proactive"]:
        print(f"proactive @ RTT {c['rtt_ms']:g} ms: {c['per_token_ms_off']:.2f} -> {c['per_token_ms_on']:.2f} ms/token "
              f"(x{c['speedup']:.3f}, medians; runs {_runs(c['per_token_ms_off_runs'])} -> "
              f"{_runs(c['per_token_ms_on_runs'])}), matches_target {c['matches_target_on']}: "
              f"{'pass' if c['pass'] else 'FAIL'}")


def parse_args(argv: list[str] | None = None) -> ControlsConfig:
    ap = config.add_flags(argparse.ArgumentParser(description=__doc__.splitlines()[0]), ControlsConfig)
    cfg = config.parse(ControlsConfig, argv, ap)
    if not Path(cfg.predictor).exists():
        ap.error(f"no rejection predictor at {cfg.predictor}: train one with "
                 "python -m scripts.train.rejection_predictor")
    return cfg


if __name__ == "__main__":
    run(parse_args(sys.argv[1:]))
