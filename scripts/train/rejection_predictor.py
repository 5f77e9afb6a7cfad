"""Train WISP's rejection predictor from logged greedy-SD rounds and report held-out recall, FPR and WDT.

Usage: ``python -m scripts.train.rejection_predictor [--prompts 150] [--k-max 16] [--threshold P] [--rtt-ms 20]
[--out results/rejection_predictor.json]``

Runs greedy SD (built-in pair, calib split) at K = k_max, logs each drafted token's features (wisv.decoding.rejection)
and its outcome (accepted, or the first rejected; later tokens excluded), holds out whole rounds, trains the
MLP, and reports recall / FPR on the held-out tokens.  WDT with the predictor is what the same held-out
rounds would have wasted had drafting stopped at the first flagged token (the verdict of the tokens sent is
unchanged on the greedy path, so accepted = min(accepted, sent)); ``tau_d`` is the measured drafter time
per token.  The operating point (``--threshold``; by default chosen on the training rounds with
``wisv.decoding.rejection.choose_threshold``: least modelled time per committed token, a round's fixed cost being
``--rtt-ms`` plus the measured verification time) is saved with the weights, and UEs use it unless told
otherwise.  Writes JSON and the predictor's weights (safetensors).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

import config
from wisv.decoding.acceptance import greedy_accept_ids
from wisv.decoding.rejection import (
    choose_threshold,
    evaluate_predictor,
    round_labels,
    save_predictor,
    split_rounds,
    stop_length,
    train_predictor,
    wasted_drafting,
)
from wisv.decoding.sessions import DraftSession, VerifySession
from wisv.models.loader import load_pair
from wisv.records.summary import summarize_rounds
from wisv.tasks.evaluate import eos_id
from wisv.tasks.prompts import encode_prompt
from wisv.tasks.toydata import load_split


@dataclass
class PredictorConfig:
    """One training run (written into the JSON and beside it as <out stem>_config.toml)."""

    prompts: int = 150  # calib-split prompts whose greedy-SD rounds are logged
    k_max: int = 16  # K_max: tokens drafted per logged round
    threshold: float | None = None  # operating point p(rejected) (None: chosen on the training rounds, see above)
    rtt_ms: float = 20.0  # link RTT in a round's fixed cost, ms (the default link's)
    test_frac: float = 0.3  # fraction of the rounds held out for the report
    seed: int = 0  # split and training seed
    out: str = "results/rejection_predictor.json"  # the report; the weights go to <out stem>.safetensors


def log_rounds(pair, prompts: int, k: int, max_new: int = 160) -> tuple[list[dict], float, float]:
    """Greedy SD rounds with per-token features; returns rounds, the drafter's seconds per token and the
    target's seconds per verification."""
    rounds, t_draft, n_draft, t_verify = [], 0.0, 0, 0.0
    eos = eos_id(pair.target)
    for p in tqdm(load_split("calib", prompts), desc="greedy SD rounds"):
        ids = encode_prompt(pair.tokenizer, p.prompt)
        d, t, out = DraftSession(pair.drafter, ids), VerifySession(pair.target, ids), 0
        while out < max_new:
            t0 = time.perf_counter()
            dr = d.draft(min(k, max_new - out), eos_token_id=eos)
            t_draft, n_draft = t_draft + time.perf_counter() - t0, n_draft + len(dr.tokens)
            t0 = time.perf_counter()
            argmax = t.verify(dr.tokens).argmax
            t_verify += time.perf_counter() - t0
            v = greedy_accept_ids(torch.tensor(dr.tokens), argmax)
            rounds.append({"features": dr.features, "drafted": len(dr.tokens), "accepted": v.n_accepted})
            committed = t.commit(dr.tokens, v.n_accepted, v.next_token)
            d.commit(committed)
            out += len(committed)
            if eos in committed:
                break
    return rounds, t_draft / max(1, n_draft), t_verify / max(1, len(rounds))


def dataset(rounds: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = [], []
    for r in rounds:
        lab = round_labels(r["drafted"], r["accepted"])
        xs.append(r["features"][: len(lab)])
        ys.append(torch.tensor(lab, dtype=torch.float32))
    return torch.cat(xs), torch.cat(ys)


def wdt_report(model, rounds: list[dict], threshold: float, k_max: int, tau_d: float) -> dict:
    """Mean wasted tokens / seconds per round without and with stop-at-first-predicted-rejection."""
    base, pred = [], []  # per round: (drafted, accepted, wdt_tokens) as sent, and had drafting stopped
    with torch.no_grad():
        for r in rounds:
            sent = stop_length(model(r["features"]).tolist(), threshold, k_max)
            for log, k, acc in ((base, r["drafted"], r["accepted"]), (pred, sent, min(r["accepted"], sent))):
                log.append({"drafted": k, "accepted": acc, "wdt_tokens": wasted_drafting(k, acc, tau_d)[0]})
    without, with_ = (summarize_rounds(pd.DataFrame(log, columns=["drafted", "accepted", "wdt_tokens"]))
                      for log in (base, pred))
    return {"wdt_tokens_per_round_without": without["wdt_tokens_per_round"],
            "wdt_tokens_per_round_with": with_["wdt_tokens_per_round"],
            "wdt_ms_per_round_without": 1e3 * tau_d * without["wdt_tokens_per_round"],
            "wdt_ms_per_round_with": 1e3 * tau_d * with_["wdt_tokens_per_round"],
            "aal_without": without["aal"], "aal_with": with_["aal"],
            "drafted_per_round_with": sum(r["drafted"] for r in pred) / max(1, len(pred))}


def parse_args(argv: list[str] | None = None) -> PredictorConfig:
    return config.parse(PredictorConfig, argv, prog="python -m scripts.train.rejection_predictor",
                        description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(1)
    rounds, tau_d, t_verify = log_rounds(load_pair(), args.prompts, args.k_max)
    test = split_rounds(len(rounds), args.test_frac, args.seed)
    train_r = [r for r, t in zip(rounds, test) if not t]
    test_r = [r for r, t in zip(rounds, test) if t]
    model = train_predictor(*dataset(train_r), seed=args.seed)
    round_s = args.rtt_ms / 1e3 + t_verify
    with torch.no_grad():
        chosen, cost = choose_threshold([model(r["features"]).tolist() for r in train_r],
                                        [r["accepted"] for r in train_r], args.k_max, tau_d, round_s)
    threshold = chosen if args.threshold is None else args.threshold
    model.threshold.fill_(threshold)
    met = evaluate_predictor(model, *dataset(test_r), threshold)
    doc = {"config": asdict(args), "rounds_train": len(train_r), "rounds_test": len(test_r), "tau_d_s": tau_d,
           "t_verify_s": t_verify, "round_fixed_s": round_s, "threshold": threshold,
           "modelled_ms_per_token_train": {f"{th:g}": 1e3 * c for th, c in cost.items()},
           "held_out": {"recall": met.recall, "fpr": met.fpr, "n_rejected": met.n_rejected,
                        "n_accepted": met.n_accepted},
           "wdt_held_out": wdt_report(model, test_r, threshold, args.k_max, tau_d)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    config.write_config_beside(out, args, config.provenance())
    save_predictor(model, str(out.with_suffix(".safetensors")))
    print(json.dumps({k: doc[k] for k in ("threshold", "held_out", "wdt_held_out")}, indent=1))
    return doc


if __name__ == "__main__":
    main()
