"""Train the edge's WDT predictor (wisv/serving/wdt.py) from round records; report g_i's MAE against the running mean.

Usage: ``python -m scripts.train.wdt_predictor [--prompts 120] [--ks 4 8 16 32] [--rounds RUN/greedy/rounds.csv ...]
[--out runs/wdt_predictor.json]``

Round records come from ``--rounds`` (testbed runs with ``--draft-features``: their ``draft_*`` columns), or are
logged here: greedy SD on the built-in pair's calib split (or ``--drafter/--target``), each round drafting K drawn
from ``--ks`` (seeded), every round a wisv.records.RoundRow with the block's confidence summary, written to
``wdt_rounds.csv`` beside the JSON.  Whole prompts are held out (``--test-frac``).  Reports, on the held-out rounds,
the mean absolute error of g_i (committed tokens) of the predictor and of the session's running mean (what the edge
used), and WDT per round (wasted draft tokens), measured and predicted.  Writes the predictor (JSON: the edge loads
it with ``testbed.serve --wdt-predictor``) and the report.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

import config
from testbed.common.machine import machine_info
from wisv.decoding.acceptance import greedy_accept_ids
from wisv.decoding.sessions import DraftSession, VerifySession
from wisv.decoding.speculative import truncate_output
from wisv.models.loader import load_pair
from wisv.records.rows import RoundRow, read_records, to_frame
from wisv.serving.wdt import confidence_summary, evaluate, fit_wdt, split_prompts
from wisv.tasks.evaluate import eos_id
from wisv.tasks.prompts import prompt_rows

GOAL_MAE_REDUCTION_PCT = 30.0  # the goal: g_i's MAE >= 30% below the running mean's


@dataclass
class WDTConfig:
    """wdt_predictor settings (saved beside the JSON)."""

    out: str = "runs/wdt_predictor.json"  # the predictor, the report to <stem>_report.json (committed: results/)
    prompts: int = field(default=120, metadata={"min": 1})  # prompts of the calib split logged (ignored with --rounds)
    ks: list[int] = field(default_factory=lambda: [4, 8, 16, 32],
                          metadata={"min": 1})  # K of each logged round, drawn uniformly
    max_new_tokens: int = field(default=160, metadata={"min": 1})  # generation budget per prompt, tokens
    rounds: list[str] = field(default_factory=list)  # round records (rounds.csv) to train from instead of logging
    test_frac: float = 0.3  # held-out share of the prompts
    ridge: float = 1e-2  # ridge penalty (on standardised features)
    seed: int = 0  # K draws and the held-out split
    drafter: str | None = None  # local HF drafter (None: the built-in toy pair's)
    target: str | None = None  # local HF target (None: the built-in toy pair's)


def log_rounds(cfg: WDTConfig) -> pd.DataFrame:
    """Greedy SD on the calib split, K drawn per round; one RoundRow per round with its confidence summary."""
    pair = load_pair(cfg.drafter, cfg.target)
    eos, rng, rows = eos_id(pair.target), np.random.default_rng(cfg.seed), []
    for p in tqdm(prompt_rows(pair.tokenizer, "calib", cfg.prompts), desc="greedy SD rounds"):
        ids = list(p["prompt_ids"])
        d, t, out = DraftSession(pair.drafter, ids), VerifySession(pair.target, ids), []
        while len(out) < cfg.max_new_tokens:
            budget = cfg.max_new_tokens - len(out)
            k = max(1, min(int(rng.choice(cfg.ks)), budget - 1))
            dr = d.draft(k, eos_token_id=eos)
            v = greedy_accept_ids(torch.tensor(dr.tokens), t.verify(dr.tokens).argmax)
            committed = t.commit(dr.tokens, v.n_accepted, v.next_token)
            d.commit(committed)
            kept = truncate_output(committed, budget, eos)
            rows.append(RoundRow(prompt_id=str(p["prompt_id"]), round=len(rows), drafted=len(dr.tokens),
                                 accepted=v.n_accepted, committed=len(kept), prefix_len=len(ids) + len(out),
                                 prompt_len=len(ids), **confidence_summary(dr.features[:, :3].numpy())))
            out += kept
            if kept[-1] == eos:
                break
    return to_frame(rows)


def run(cfg: WDTConfig) -> dict:
    torch.set_num_threads(1)
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if cfg.rounds:
        rounds = pd.concat([read_records(p).assign(prompt_id=lambda df, p=p: p + ":" + df["prompt_id"].astype(str))
                            for p in cfg.rounds], ignore_index=True)
    else:
        rounds = log_rounds(cfg)
        rounds.to_csv(out.with_name("wdt_rounds.csv"), index=False)
    rounds = rounds.dropna(subset=["drafted", "accepted"]).reset_index(drop=True)
    held = split_prompts(rounds["prompt_id"].astype(str), cfg.test_frac, cfg.seed)
    test = rounds["prompt_id"].astype(str).isin(held)
    pred = fit_wdt(rounds[~test], cfg.ridge)
    report = {"train": evaluate(pred, rounds[~test]), "held_out": evaluate(pred, rounds[test].reset_index(drop=True)),
              "held_out_prompts": len(held), "goal_mae_reduction_pct": GOAL_MAE_REDUCTION_PCT,
              "config": asdict(cfg), "machine": machine_info()}
    r_test = rounds[test].reset_index(drop=True)
    report["held_out_by_k"] = {int(k): evaluate(pred, g.reset_index(drop=True)) for k, g in r_test.groupby("drafted")
                               if len(g) >= 20}
    pred.meta = {"train_rounds": int((~test).sum()), "held_out": report["held_out"]}
    pred.save(out)
    report_path = out.with_name(out.stem + "_report.json")
    report_path.write_text(json.dumps(report, indent=1))
    config.write_config_beside(report_path, cfg)
    h = report["held_out"]
    print(f"held-out rounds {h['rounds']} ({len(held)} prompts): g_i MAE predicted {h['mae_g_predicted']:.3f} vs "
          f"running mean {h['mae_g_running_mean']:.3f} tokens ({h['mae_reduction_pct']:.1f}% lower; goal >= "
          f"{GOAL_MAE_REDUCTION_PCT:g}%; history alone, no draft features: {h['mae_g_history_only']:.3f}); "
          f"WDT per round {h['wdt_tokens_per_round']:.2f} tokens measured, "
          f"{h['wdt_predicted_per_round']:.2f} predicted (MAE {h['wdt_mae_tokens']:.2f})")
    for k, e in report["held_out_by_k"].items():
        print(f"  K={k}: {e['rounds']} rounds, MAE {e['mae_g_predicted']:.3f} vs {e['mae_g_running_mean']:.3f} "
              f"({e['mae_reduction_pct']:.1f}% lower), WDT {e['wdt_tokens_per_round']:.2f}")
    print(f"wrote {out}, {report_path}")
    return report


def main(argv: list[str] | None = None) -> None:
    cfg = config.parse(WDTConfig, argv, description=__doc__.splitlines()[0])
    if config.run_reporting("scripts/train/wdt_predictor.py", lambda: run(cfg)):
        sys.exit(2)


if __name__ == "__main__":
    main()
