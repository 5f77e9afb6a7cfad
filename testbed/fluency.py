"""``python -m testbed.fluency RUN_DIR``: add the third LM's fluency (``fluency_ext_ppl_ratio``) to a finished run.

A ``testbed.run`` output holds each prompt's decoded prompt and output (``<protocol>/outputs.jsonl``: ``prompt_text``,
``text``) and the target-only reference's text (``reference.jsonl``).  This scores both under the fluency scorer
(``wisv.pairs.scorer``, ``--fluency-model``), pools the ratio over each protocol's successful prompts as the summary
does, and writes it into ``<protocol>/summary.json`` and ``summary.csv``; it prints one line per protocol.  A run
without texts (no tokenizer) or without a reference gets nan.  What the score measures: docs/fluency.md.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

from testbed.common.files import write_csv_atomic, write_json_atomic
from testbed.common.summary import TextScorer
from wisv.pairs.scorer import SCORERS, resolve_scorer
from wisv.tasks.textquality import pooled_ppl_ratio

COLUMN = "fluency_ext_ppl_ratio"


def ext_ratio(outputs: pd.DataFrame, ref_text: dict[str, str], scorer: TextScorer) -> float:
    """The pooled ratio of the successful outputs that have a reference, each scored after its prompt text."""
    ok = outputs[outputs["error"].isna()] if "error" in outputs else outputs
    if not {"prompt_text", "text"} <= set(ok) or not len(ok):
        return math.nan
    have = [(p, c, t) for p, c, t in zip(ok["prompt_id"].astype(str), ok["prompt_text"], ok["text"]) if p in ref_text]
    if not have:
        return math.nan
    return pooled_ppl_ratio([scorer(c, t) for _, c, t in have], [scorer(c, ref_text[p]) for p, c, _ in have])


def rescore(run_dir: Path, scorer: TextScorer) -> dict[str, float]:
    """Each protocol's ratio, written into its summary.json and the run's summary.csv."""
    ref_file = run_dir / "reference.jsonl"
    refs = pd.read_json(ref_file, lines=True) if ref_file.is_file() else pd.DataFrame()
    ref_text = dict(zip(refs["prompt_id"].astype(str), refs["text"])) if "text" in refs else {}
    out = {}
    for summary in sorted(run_dir.glob("*/summary.json")):
        s = json.loads(summary.read_text())
        outputs = pd.read_json(summary.parent / "outputs.jsonl", lines=True)
        s[COLUMN] = out[s["protocol"]] = ext_ratio(outputs, ref_text, scorer)
        write_json_atomic(summary, s)
    if (run_dir / "summary.csv").is_file() and out:
        df = pd.read_csv(run_dir / "summary.csv")
        df[COLUMN] = df["protocol"].map(out)
        write_csv_atomic(run_dir / "summary.csv", df)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m testbed.fluency", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="a testbed.run output directory")
    ap.add_argument("--fluency-model", default="auto", choices=("auto", *SCORERS),
                    help="the third LM (auto: the default scorer; it must be built: python -m wisv.pairs scorer)")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    if not (args.run_dir / "prompts.jsonl").is_file():
        ap.error(f"{args.run_dir}: not a testbed.run output directory (no prompts.jsonl)")
    scorer = resolve_scorer(args.fluency_model, device=args.device)
    if scorer is None:
        ap.error("no fluency scorer: build it first with `python -m wisv.pairs scorer` (or `make pair`)")
    for proto, r in rescore(args.run_dir, scorer).items():
        print(f"{proto}: {COLUMN} = {r:.3f}")


if __name__ == "__main__":
    main()
