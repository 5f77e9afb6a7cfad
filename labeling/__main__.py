"""CLI of the labeling pipeline: ``python -m labeling {collect,label,relabel,train,evaluate,export,all} --run-dir DIR``.

Each stage reads the previous stages' files from the run directory and writes its own, so any stage can
be re-run alone.  ``all`` runs the five training and evaluation stages in order; ``export`` then copies
the head, at evaluate's chosen tau and with its card, to a directory the edge loads (``--head PATH``).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import fields

from labeling import collect, evaluate, export, label, relabel, train
from labeling.config import CollectConfig, EvalConfig, LabelConfig, RelabelConfig, TrainConfig

STAGES = {"collect": (CollectConfig, collect.run), "label": (LabelConfig, label.run),
          "relabel": (RelabelConfig, relabel.run), "train": (TrainConfig, train.run),
          "evaluate": (EvalConfig, evaluate.run), "export": (export.ExportConfig, export.run)}
HELP = {
    "prompts_file": "JSONL prompts with reference answers ({'prompt': question, 'answer': N} per line)",
    "checker": "task outcome checker module:function(text, answer) -> bool",
    "lam": "eq. 28 decay per token of distance", "m_csi": "CSI realisations per episode",
    "budget_min": "B(q) = n_crit * (budget_min + (1 - budget_min) q^gamma)", "temperature": "T of eq. 31",
    "variant": "csi | nocsi", "taus": "thresholds to sweep", "variants": "heads to evaluate",
    "channels": "regimes as NAME=RATE_MBPS/RTT_MS, e.g. good=500/5 poor=2/50",
    "to": "destination head directory", "run_dir": "the pipeline's run directory (every stage reads and writes here)",
}


def _add_fields(p: argparse.ArgumentParser, cls) -> None:
    for f in fields(cls):
        flag, default = "--" + f.name.replace("_", "-"), f.default
        if f.name == "channels":
            p.add_argument(flag, nargs="+", default=None, help=HELP[f.name])
        elif isinstance(default, tuple):
            p.add_argument(flag, nargs=len(default) if f.name in ("rate_mbps", "rtt_ms", "per") else "+",
                           type=type(default[0]), default=None, help=HELP.get(f.name, f"default {default}"))
        else:
            kind = float if isinstance(default, float) else int if isinstance(default, int) else str
            p.add_argument(flag, type=kind, default=None, help=HELP.get(f.name, f"default {default}"))


def parse_channels(specs: list[str]) -> dict[str, tuple[float, float]]:
    """['good=500/5', 'poor=2/50'] -> {'good': (500.0, 5.0), 'poor': (2.0, 50.0)}."""
    out = {}
    for s in specs:
        try:
            name, rest = s.split("=")
            rate, rtt = rest.split("/")
            out[name] = (float(rate), float(rtt))
        except ValueError:
            raise SystemExit(f"--channels: bad entry {s!r}; use NAME=RATE_MBPS/RTT_MS") from None
    return out


def make_config(cls, ns: argparse.Namespace):
    kw = {f.name: getattr(ns, f.name) for f in fields(cls) if getattr(ns, f.name, None) is not None}
    if "channels" in kw:
        kw["channels"] = parse_channels(kw["channels"])
    for k in ("rate_mbps", "rtt_ms", "per", "taus", "variants"):
        if k in kw:
            kw[k] = tuple(kw[k])
    return cls(**kw)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labeling", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="stage", required=True)
    for name, (cls, _) in STAGES.items():
        _add_fields(sub.add_parser(name, help=f"{name} stage"), cls)
    p_all = sub.add_parser("all", help="collect, label, relabel, train (csi and nocsi), evaluate")
    p_all.add_argument("--run-dir", default="runs/labeling")
    p_all.add_argument("--prompts", type=int, default=None, help="calibration prompts (collect)")
    p_all.add_argument("--eval-prompts", type=int, default=None, help="test prompts (evaluate)")
    ns = ap.parse_args(argv)
    try:
        if ns.stage == "all":
            return _run_all(ns)
        cls, fn = STAGES[ns.stage]
        fn(make_config(cls, ns))
    except (ValueError, FileNotFoundError) as e:
        print(f"labeling {ns.stage}: error: {e}", file=sys.stderr)
        return 2
    return 0


def _run_all(ns: argparse.Namespace) -> int:
    rd = ns.run_dir
    collect.run(CollectConfig(run_dir=rd, **({"prompts": ns.prompts} if ns.prompts else {})))
    label.run(LabelConfig(run_dir=rd))
    relabel.run(RelabelConfig(run_dir=rd))
    for variant in ("csi", "nocsi"):
        train.run(TrainConfig(run_dir=rd, variant=variant))
    evaluate.run(EvalConfig(run_dir=rd, **({"prompts": ns.eval_prompts} if ns.eval_prompts else {})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
