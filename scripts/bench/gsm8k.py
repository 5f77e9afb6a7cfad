"""GSM8K accuracy of testbed.run outputs by lm-evaluation-harness's two rules, each protocol against server-only.

Usage: ``python -m scripts.bench.gsm8k RUN_DIR[,RUN_DIR...] [--out runs/gsm8k/scores.json]``

Each RUN_DIR (comma-separated) is a ``python -m testbed.run --dataset gsm8k`` output (one protocol or several).
Every protocol's finished outputs are scored by strict match and flexible extract (``wisv.tasks.scoring``: the
harness's regexes and ``exact_match``) against the problem's ``#### N``; on the problems both finished, each
protocol is compared with server-only (the target's greedy output over the link) prompt by prompt: outputs
identical, answers lost and gained under each rule. A lossless method must equal server-only on every problem.
Writes the JSON (the runs' configs named) and prints a table.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

import config
from wisv.tasks.scoring import RULES, gsm8k_correct

PROG = "python -m scripts.bench.gsm8k"
BASELINE = "server"


@dataclass
class ScoreConfig:
    """Which runs to score, and where the scores go."""

    runs: list[str] = field(default_factory=list, metadata={"positional": True})  # testbed.run dirs, comma-separated
    out: str = "runs/gsm8k/scores.json"  # the scores' JSON


def read_run(run_dir: Path) -> pd.DataFrame:
    """A run's finished outputs, one row per (protocol, prompt): text, tokens and the reference solution."""
    if not (run_dir / "prompts.jsonl").is_file():
        raise ValueError(f"{run_dir} is not a testbed.run output directory (no prompts.jsonl)")
    prompts = pd.read_json(run_dir / "prompts.jsonl", lines=True, dtype={"prompt_id": str})
    if "answer" not in prompts or not prompts["answer"].map(lambda a: isinstance(a, str) and "####" in a).all():
        raise ValueError(f"{run_dir}: its prompts are not GSM8K's (no '#### N' answers): run with --dataset gsm8k")
    frames = []
    for out in sorted(run_dir.glob("*/outputs.jsonl")):
        o = pd.read_json(out, lines=True, dtype={"prompt_id": str})
        if "error" in o:
            o = o[o["error"].isna()]
        frames.append(o[["prompt_id", "text", "tokens"]].assign(protocol=out.parent.name))
    if not frames:
        raise ValueError(f"{run_dir} has no <protocol>/outputs.jsonl")
    return pd.concat(frames).merge(prompts[["prompt_id", "answer"]], on="prompt_id")


def score(df: pd.DataFrame) -> pd.DataFrame:
    """Per (protocol, prompt): whether each rule scores it right (columns named by rule)."""
    return df.assign(**{rule: [gsm8k_correct(t, a, rule) for t, a in zip(df["text"], df["answer"])]
                        for rule in RULES})


def summarize(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per protocol: problems, accuracy by each rule, and against server-only on the problems both
    finished: identical outputs, and answers lost and gained by each rule."""
    base = scored[scored["protocol"] == BASELINE].set_index("prompt_id")
    rows = []
    for proto, g in scored.groupby("protocol", sort=False):
        row = {"protocol": proto, "problems": len(g)} | {rule: float(g[rule].mean()) for rule in RULES}
        both = g[g["prompt_id"].isin(base.index)].set_index("prompt_id")
        if len(base) and len(both):
            b = base.loc[both.index]
            row |= {"paired": len(both), "identical_to_server": float((both["tokens"].map(list)
                                                                     == b["tokens"].map(list)).mean())}
            for rule in RULES:
                row |= {f"{rule} lost": int((b[rule] & ~both[rule]).sum()),
                        f"{rule} gained": int((~b[rule] & both[rule]).sum())}
        rows.append(row)
    return pd.DataFrame(rows).set_index("protocol")


def main(argv: list[str] | None = None) -> None:
    cfg = config.parse(ScoreConfig, argv, prog=PROG, description=__doc__.splitlines()[0])
    try:
        runs = pd.concat([read_run(Path(d)) for d in cfg.runs], ignore_index=True)
        scored = score(runs.drop_duplicates(["protocol", "prompt_id"]))  # a protocol in two runs: the first's
    except (ValueError, OSError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(2)
    table = summarize(scored)
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    configs = {d: json.loads((Path(d) / "config.json").read_text()) if (Path(d) / "config.json").is_file() else None
               for d in cfg.runs}
    out.write_text(json.dumps({"runs": cfg.runs, "command": " ".join(sys.argv), "table": table.reset_index().to_dict(
        "records"), "run_configs": configs}, indent=1, default=str))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
