"""Benchmark the UE-side controls on the built-in pair: WISP's rejection predictor and SpecEdge's proactive drafting.

Usage: ``python scripts/ue_controls.py [--prompts 20] [--out results/ue_controls.json]``.
Runs ``testbed.run`` (greedy, ``--head none``) in pairs that differ in one flag:

- predictor off/on at K_max = ``--k-max`` (default 16): passes when WDT per round falls by >= 25% and
  throughput (goodput) is not lower;
- proactive drafting off/on (``--proactive K``) at each RTT in ``--rtts-ms`` (default 20, 50): passes when the
  mean latency per generated token is lower and the output is still target-only greedy (matches_target 1.0).

Writes one JSON with every run's summary, its config and the checks; exits 0 even when a check fails.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from testbed.link import LinkSpec  # noqa: E402

WDT_CUT = 0.25  # predictor: WDT per round must fall by at least this fraction


@dataclass
class ControlsConfig:
    """One benchmark (written into the JSON)."""

    out: str = "results/ue_controls.json"
    prompts: int = 20
    k_max: int = 16  # predictor runs: K_max
    draft_len: int = 8  # proactive runs: K
    rtts_ms: list[float] = field(default_factory=lambda: [20.0, 50.0])  # proactive runs: link RTTs
    predictor: str = "results/rejection_predictor.safetensors"  # scripts/rejection_predictor.py writes it
    runs_dir: str = "runs/ue-controls"


def predictor_check(off: dict, on: dict) -> dict:
    """WDT per round falls by >= WDT_CUT at equal or better throughput (pure)."""
    cut = 1 - on["wdt_tokens_per_round"] / off["wdt_tokens_per_round"] if off["wdt_tokens_per_round"] else 0.0
    ok = cut >= WDT_CUT and on["throughput_tok_s"] >= off["throughput_tok_s"]
    return {"wdt_off": off["wdt_tokens_per_round"], "wdt_on": on["wdt_tokens_per_round"], "wdt_cut": cut,
            "goodput_off": off["throughput_tok_s"], "goodput_on": on["throughput_tok_s"], "pass": bool(ok)}


def per_token_s(s: dict) -> float:
    """Mean end-to-end latency per generated token of a run summary, s."""
    return s["latency_s"] * s["prompts"] / s["generated_tokens"]


def proactive_check(off: dict, on: dict, rtt_ms: float) -> dict:
    """Lower latency per token with proactive drafting, output still greedy (pure)."""
    a, b = per_token_s(off), per_token_s(on)
    ok = b < a and on.get("matches_target") == 1.0
    return {"rtt_ms": rtt_ms, "per_token_ms_off": a * 1e3, "per_token_ms_on": b * 1e3, "speedup": a / b,
            "matches_target_on": on.get("matches_target"), "pass": bool(ok)}


def _run(rc, name: str) -> dict:
    from testbed.run import run
    (summary,) = run(replace(rc, out=str(Path(rc.out) / name)))
    return summary | {"config": asdict(rc)}  # asdict recurses into the link


def run(cfg: ControlsConfig) -> dict:
    from testbed.run import RunConfig
    base = RunConfig(protocol="greedy", prompts=cfg.prompts, head="none", out=cfg.runs_dir)
    k = replace(base, draft_len=cfg.k_max, reference=False)
    runs = {"rp_off": _run(k, "rp_off"), "rp_on": _run(replace(k, rejection_predictor=cfg.predictor), "rp_on")}
    checks = {"predictor": predictor_check(runs["rp_off"], runs["rp_on"]), "proactive": []}
    for rtt in cfg.rtts_ms:
        p = replace(base, draft_len=cfg.draft_len, link=replace(LinkSpec(), rtt_ms=rtt))
        off, on = _run(p, f"pro_off_rtt{rtt:g}"), _run(replace(p, proactive=cfg.draft_len), f"pro_on_rtt{rtt:g}")
        runs |= {f"pro_off_rtt{rtt:g}": off, f"pro_on_rtt{rtt:g}": on}
        checks["proactive"].append(proactive_check(off, on, rtt))
    doc = {"config": asdict(cfg), "runs": runs, "checks": checks}
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(doc, indent=1, default=str))
    _print(checks)
    return doc


def _print(checks: dict) -> None:
    p = checks["predictor"]
    print(f"predictor: WDT/round {p['wdt_off']:.2f} -> {p['wdt_on']:.2f} (-{p['wdt_cut']:.0%}), goodput "
          f"{p['goodput_off']:.1f} -> {p['goodput_on']:.1f} tok/s: {'pass' if p['pass'] else 'FAIL'}")
    for c in checks["proactive"]:
        print(f"proactive @ RTT {c['rtt_ms']:g} ms: {c['per_token_ms_off']:.2f} -> {c['per_token_ms_on']:.2f} ms/token "
              f"(x{c['speedup']:.3f}), matches_target {c['matches_target_on']}: {'pass' if c['pass'] else 'FAIL'}")


def parse_args(argv: list[str] | None = None) -> ControlsConfig:
    d = ControlsConfig()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=d.out)
    ap.add_argument("--prompts", type=int, default=d.prompts)
    ap.add_argument("--k-max", type=int, default=d.k_max)
    ap.add_argument("--draft-len", type=int, default=d.draft_len)
    ap.add_argument("--rtts-ms", type=lambda s: [float(x) for x in s.split(",") if x.strip()], default=d.rtts_ms)
    ap.add_argument("--predictor", default=d.predictor)
    ap.add_argument("--runs-dir", default=d.runs_dir)
    a = ap.parse_args(argv)
    if not Path(a.predictor).exists():
        ap.error(f"no rejection predictor at {a.predictor}: train one with python scripts/rejection_predictor.py")
    return ControlsConfig(**vars(a))


if __name__ == "__main__":
    run(parse_args(sys.argv[1:]))
