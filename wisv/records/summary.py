"""The one summary of per-round records: AAL, rounds per prompt, latency, throughput and WDT, the same rounds in
vLLM's per-request speculative-decoding names, and the latencies a user sees in vLLM's benchmark names: TTFT, TPOT,
ITL, E2EL and output throughput (pandas and numpy, no torch)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd


def summarize_rounds(rounds: pd.DataFrame, prompts: pd.DataFrame | None = None) -> dict:
    """AAL (eq. 20), rounds per prompt (eq. 21), generated tokens per prompt and rounds per 100 generated tokens (a
    gain from shorter outputs is drift, not speed), mean latency per prompt, throughput and WDT per round; and
    vLLM's per-request names over all the rounds (``spec_decode_metrics``).

    ``rounds``: per-round records (wisv.records.rows; ``accepted``, and ``wdt_tokens`` where measured).
    ``prompts``: one row per finished prompt, with ``latency_s`` (its end-to-end time, s) and ``n_tokens`` (tokens
    it generated) where known; None when the caller has no per-prompt data.  Undefined values are NaN, except
    rounds per prompt with no finished prompt: the rounds over 1 (0.0 when none was recorded), as testbed.run wrote."""
    n = len(prompts) if prompts is not None else 0
    latency = prompts["latency_s"] if prompts is not None and "latency_s" in prompts else pd.Series(dtype=float)
    total_s = float(latency.sum()) if len(latency) else math.nan
    tokens = int(prompts["n_tokens"].sum()) if prompts is not None and "n_tokens" in prompts else 0
    return {
        "aal": float(rounds["accepted"].mean()) if len(rounds) and "accepted" in rounds else math.nan,
        "rounds_per_prompt": float(len(rounds) / max(1, n)) if prompts is not None else math.nan,
        "tokens_per_prompt": tokens / n if n and "n_tokens" in prompts else math.nan,
        "rounds_per_100_tokens": 100 * len(rounds) / tokens if tokens else math.nan,
        "latency_s": float(latency.mean()) if len(latency) else math.nan,
        "throughput_tok_s": tokens / total_s if total_s > 0 else math.nan,
        "wdt_tokens_per_round": float(rounds["wdt_tokens"].mean()) if "wdt_tokens" in rounds else math.nan,
        **spec_decode_metrics(rounds),
        **latency_metrics(rounds),
    }


def spec_steps(rounds: pd.DataFrame) -> pd.DataFrame:
    """The rounds that are speculative steps: one target pass over a draft, the UE's (``drafted``) and the edge's own
    extension after it (``edge_drafted``, --edge-draft; a round of several tokens the edge drafted alone on a
    hand-over, ``edge_alone``, is several passes and no step); ``accepted`` known.  Each step's draft is ``drafted +
    edge_drafted`` tokens and its ``accepted`` counts the accepted tokens of both (``edge_accepted`` the edge's)."""
    edge = rounds["edge_drafted"].fillna(0) if "edge_drafted" in rounds else 0  # [rounds]
    alone = rounds["edge_alone"].eq(True) if "edge_alone" in rounds else pd.Series(False, index=rounds.index)
    return rounds[(rounds["drafted"] + edge > 0) & ~alone & rounds["accepted"].notna()]


def step_draft(steps: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(each step's draft tokens, the longest path it could accept: a chain's ``drafted``, a tree's ``tree_depth``),
    the edge's extension counted in both."""
    edge = steps["edge_drafted"].fillna(0).astype(int) if "edge_drafted" in steps else 0
    longest = steps["tree_depth"].fillna(steps["drafted"]) if "tree_depth" in steps else steps["drafted"]
    return steps["drafted"] + edge, longest + edge


SPEC_DECODE_NAMES = ("mean_acceptance_length", "draft_acceptance_rate", "acceptance_histogram", "num_spec_steps",
                     "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_tokens")  # vLLM's, in its order


def spec_decode_metrics(rounds: pd.DataFrame) -> dict:
    """vLLM's per-request speculative-decoding metrics (``--per-request-spec-decode-metrics``, vLLM PR #48915;
    SGLang's ``sglext_spec`` alike) of the rounds of one prompt, or of a whole run (the same sums over all its rounds).

    A spec step is a round that drafted at least one token (vLLM counts no step without draft tokens).  Its accepted
    draft tokens are the round's ``accepted``: the draft tokens it committed, so under WISV also the mismatches the
    head kept (vLLM's rejection sampler keeps none); a tree's are its accepted path.  Its draft tokens are
    ``drafted``: the chain's block, or the tree's nodes uploaded, and the edge's extension after a chain
    (``edge_drafted``: its accepted tokens are in ``accepted``, ``spec_steps``).  ``num_spec_tokens`` is the longest
    draft any step could accept (a chain's ``drafted``, a tree's ``tree_depth``, with the edge's extension): K when
    some step drafted a full block, the most under an auto window.  ``acceptance_histogram[j]`` counts the steps
    that accepted exactly j draft tokens (length ``num_spec_tokens + 1``).  So, as vLLM defines them:

        mean_acceptance_length = 1 + num_accepted_draft_tokens / num_spec_steps   (the +1: vLLM's bonus token)
        draft_acceptance_rate  = num_accepted_draft_tokens / num_draft_tokens
        sum(acceptance_histogram) = num_spec_steps;  sum(j * h[j]) = num_accepted_draft_tokens

    and ``mean_acceptance_length = 1 + aal`` when every round drafted (docs/results.md).  Ratios with a zero
    denominator are NaN; rounds without ``drafted``/``accepted`` (another producer's) give NaN and None."""
    if not len(rounds) or not {"drafted", "accepted"} <= set(rounds):
        return {k: math.nan if k in SPEC_DECODE_NAMES[:2] else None for k in SPEC_DECODE_NAMES}
    steps = spec_steps(rounds)  # [steps, fields]
    accepted = steps["accepted"].astype(int)  # [steps] draft tokens each step committed
    drafted, longest = step_draft(steps)  # [steps] each
    k = int(longest.max()) if len(steps) else 0  # num_spec_tokens
    n_acc, n_draft = int(accepted.sum()), int(drafted.sum())
    return {
        "mean_acceptance_length": 1 + n_acc / len(steps) if len(steps) else math.nan,
        "draft_acceptance_rate": n_acc / n_draft if n_draft else math.nan,
        "acceptance_histogram": [int(c) for c in accepted.value_counts().reindex(range(k + 1), fill_value=0)],
        "num_spec_steps": int(len(steps)),
        "num_accepted_draft_tokens": n_acc,
        "num_draft_tokens": n_draft,
        "num_spec_tokens": k,
    }


LATENCY_NAMES = tuple(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p99")) \
    + ("output_throughput",)  # vLLM's benchmark names (benchmarks/benchmark_serving.py), in its order


def latency_metrics(rounds: pd.DataFrame) -> dict:
    """What a user sees of the rounds, in vLLM's benchmark names (``mean_/median_/p99_`` of each, ms), from each
    round's ``t_arrival_s`` (its tokens reached the UE, s since the prompt's OPEN went out) and ``committed``:

        TTFT (ttft) = the first round that commits a token: its arrival, per prompt
        E2EL (e2el) = the last round's arrival, per prompt
        TPOT (tpot) = (E2EL - TTFT) / (tokens - 1), per prompt of more than one token (vLLM's)
        ITL  (itl)  = per token after the first round: a round's gap since the previous round's arrival over the
                      tokens it committed (c tokens arriving together after a gap g count as c gaps g / c)
        output_throughput = all committed tokens / the sum of the E2ELs (tokens/s at the UE, prompts in turn)

    A stream of one token per chunk (server-only) has ITL = its chunk gaps, as vLLM measures; a speculative round
    spreads its gap over the tokens it committed (vLLM would count one gap per round: per token, ours is comparable
    across protocols).  The first round's other tokens arrive with the first and count in TTFT and TPOT, not ITL.
    Rounds without ``t_arrival_s`` (another producer's, older files) give NaN."""
    need = {"prompt_id", "round", "committed", "t_arrival_s"}
    r = rounds[list(need)].dropna() if len(rounds) and need <= set(rounds) else pd.DataFrame(columns=list(need))
    r = r[r["committed"] > 0].sort_values(["prompt_id", "round"])
    ttft, e2el, tpot, itl, tokens = [], [], [], [], 0
    for _, g in r.groupby("prompt_id", sort=False):
        t, c = g["t_arrival_s"].to_numpy(float), g["committed"].to_numpy(int)  # [rounds] each
        ttft.append(t[0])
        e2el.append(t[-1])
        tokens += int(c.sum())
        if c.sum() > 1:
            tpot.append((t[-1] - t[0]) / (c.sum() - 1))
        itl.append(np.repeat(np.diff(t) / c[1:], c[1:]))  # [tokens after the first round]
    out = {}
    for name, xs in (("ttft", ttft), ("tpot", tpot), ("itl", np.concatenate(itl) if itl else []), ("e2el", e2el)):
        x = 1e3 * np.asarray(xs, float)  # ms
        out |= {f"{stat}_{name}_ms": float(f(x)) if len(x) else math.nan
                for stat, f in (("mean", np.mean), ("median", np.median), ("p99", lambda v: np.percentile(v, 99)))}
    out["output_throughput"] = tokens / float(sum(e2el)) if sum(e2el) > 0 else math.nan
    return {k: out[k] for k in LATENCY_NAMES}
