"""Summaries derived from per-round records and per-prompt outputs (pandas), and the printed comparison table."""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from testbed.common.files import write_csv_atomic, write_json_atomic
from wisv.records.paired import SPEEDUP_COLUMNS
from wisv.records.summary import LATENCY_NAMES, SPEC_DECODE_NAMES, summarize_rounds
from wisv.tasks.qa import check_answer
from wisv.tasks.textquality import text_quality

SUMMARY_COLUMNS = ["protocol", "prompts", "accuracy", "aal", "rounds_per_prompt", "tokens_per_prompt",
                   "rounds_per_100_tokens", "latency_s", "throughput_tok_s",
                   "uplink_bytes", "downlink_bytes", "matches_target", "drift_rouge_l", "fluency_ppl_ratio",
                   "fluency_ext_ppl_ratio"]

Scorer = Callable[[str, list[int]], list[float]]  # (prompt_id, output tokens) -> the target's NLL per token
TextScorer = Callable[[str, str], list[float]]  # (prompt text, output text) -> a third LM's NLL per token


def summarize(protocol: str, rounds: pd.DataFrame, outputs: pd.DataFrame, prompts: pd.DataFrame,
              decode, references: dict[str, list[int]] | None, nll: Scorer | None = None,
              ext: TextScorer | None = None) -> dict:
    """One protocol's summary (decode None: no accuracy): accuracy, AAL, rounds, latency, throughput, bytes,
    losslessness (AAL, rounds, latency, throughput, WDT and vLLM's spec-decode names from wisv.records.summary over the
    round records and the successful prompts), and beside losslessness the text's drift and fluency against the
    reference (wisv.tasks.textquality; fluency needs ``nll``, the target's scorer, and the external fluency ``ext``, the
    third model's: wisv.pairs.scorer)."""
    ok = outputs[outputs["error"].isna()] if "error" in outputs else outputs
    merged = ok.merge(prompts[["prompt_id"]], on="prompt_id")
    correct = prompt_correct(ok, prompts, decode)  # accuracy only when every finished prompt has an answer
    acc = float(correct["correct"].mean()) if correct is not None and len(correct) == len(merged) else None
    n_tok = int(ok["tokens"].map(len).sum())
    per_prompt = pd.DataFrame({"latency_s": ok["t_e2e_s"], "n_tokens": ok["tokens"].map(len)}) if len(ok) \
        else pd.DataFrame(columns=["latency_s", "n_tokens"])
    m = summarize_rounds(rounds, per_prompt)
    match = None
    if references is not None and len(ok):
        match = float(sum(references.get(p) == list(t) for p, t in zip(ok["prompt_id"], ok["tokens"])) / len(ok))
    return {
        "protocol": protocol, "prompts": int(len(ok)), "errors": int(len(outputs) - len(ok)), "accuracy": acc,
        "aal": m["aal"], "rounds_per_prompt": m["rounds_per_prompt"], "tokens_per_prompt": m["tokens_per_prompt"],
        "rounds_per_100_tokens": m["rounds_per_100_tokens"], "latency_s": m["latency_s"],
        "throughput_tok_s": m["throughput_tok_s"],
        "uplink_bytes": int(rounds["uplink_bytes"].sum()) if len(rounds) else 0,
        "downlink_bytes": int(rounds["downlink_bytes"].sum()) if len(rounds) else 0,
        "matches_target": match,
        **reference_quality(ok, references, decode, nll, ext, prompts),
        "t_comm_s_mean": float(rounds["t_comm_s"].mean()) if len(rounds) else math.nan,
        "t_verify_s_mean": float(rounds["t_verify_s"].mean()) if len(rounds) else math.nan,
        "t_draft_s_mean": float(rounds["t_draft_s"].mean()) if len(rounds) else math.nan,
        "generated_tokens": n_tok,
        "wdt_tokens_per_round": m["wdt_tokens_per_round"],
        **{k: m[k] for k in SPEC_DECODE_NAMES},  # vLLM's per-request names, over all the rounds (docs/results.md)
        **{k: m[k] for k in LATENCY_NAMES},  # vLLM's benchmark names: TTFT, TPOT, ITL, E2EL (docs/protocols.md)
    }


def prompt_correct(outputs: pd.DataFrame, prompts: pd.DataFrame, decode: Callable | None) -> pd.DataFrame | None:
    """[prompt_id, correct] for every finished prompt with an answer (None: no decoder or no answers)."""
    ok = outputs[outputs["error"].isna()] if "error" in outputs else outputs
    if decode is None or "answer" not in prompts or not len(ok):
        return None
    m = ok.merge(prompts[["prompt_id", "answer"]], on="prompt_id")
    m = m[m["answer"].map(lambda a: a is not None and not (isinstance(a, float) and math.isnan(a)))]
    if not len(m):
        return None
    return pd.DataFrame({"prompt_id": m["prompt_id"],
                         "correct": [check_answer(decode(t), a) for t, a in zip(m["tokens"], m["answer"])]})


def reference_quality(ok: pd.DataFrame, references: dict[str, list[int]] | None, decode,
                      nll: Scorer | None, ext: TextScorer | None = None,
                      prompts: pd.DataFrame | None = None) -> dict[str, float]:
    """drift_rouge_l, fluency_ppl_ratio and fluency_ext_ppl_ratio of the outputs against the references (nan without
    references or decode, and each fluency without its scorer; ``ext`` reads the decoded prompt of ``prompts``)."""
    have = [(p, list(t)) for p, t in zip(ok["prompt_id"], ok["tokens"]) if references and p in references] \
        if len(ok) else []
    if not have or decode is None:
        return {"drift_rouge_l": math.nan, "fluency_ppl_ratio": math.nan, "fluency_ext_ppl_ratio": math.nan}
    texts, refs = [decode(t) for _, t in have], [decode(references[p]) for p, _ in have]
    nlls = ref_nlls = ext_nlls = ext_ref_nlls = None
    if nll is not None:
        nlls, ref_nlls = [nll(p, t) for p, t in have], [nll(p, references[p]) for p, _ in have]
    if ext is not None and prompts is not None:
        ctx = {str(p): decode(list(ids)) for p, ids in zip(prompts["prompt_id"], prompts["prompt_ids"])}
        ext_nlls = [ext(ctx[str(p)], x) for (p, _), x in zip(have, texts)]
        ext_ref_nlls = [ext(ctx[str(p)], r) for (p, _), r in zip(have, refs)]
    return text_quality(texts, refs, nlls, ref_nlls, ext_nlls, ext_ref_nlls)


def write_summary(out: Path, summaries: list[dict]) -> None:
    """``summary.csv`` (one row per summary) in ``out``, and ``summary.json`` when there is one summary, each
    written atomically."""
    write_csv_atomic(out / "summary.csv", pd.DataFrame(summaries))
    if len(summaries) == 1:
        write_json_atomic(out / "summary.json", summaries[0])


def table(summaries: list[dict]) -> str:
    """Side-by-side text table of protocol summaries."""
    df = pd.DataFrame(summaries)[SUMMARY_COLUMNS].set_index("protocol")
    fmt = {"accuracy": "{:.1%}", "aal": "{:.2f}", "rounds_per_prompt": "{:.1f}", "tokens_per_prompt": "{:.1f}",
           "rounds_per_100_tokens": "{:.1f}", "latency_s": "{:.3f}",
           "throughput_tok_s": "{:.1f}", "matches_target": "{:.2f}",
           "drift_rouge_l": "{:.3f}", "fluency_ppl_ratio": "{:.3f}", "fluency_ext_ppl_ratio": "{:.3f}"}
    for col, f in fmt.items():
        df[col] = df[col].map(
            lambda v, f=f: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f.format(v))
    return df.to_string()


LATENCY_COLUMNS = ["protocol", "mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
                   "mean_e2el_ms", "output_throughput", "uplink_bytes", "downlink_bytes"]  # the printed latency table


def latency_table(summaries: list[dict]) -> str:
    """What a user sees, per protocol, in vLLM's benchmark names (ms; output_throughput in tokens/s), the bytes each
    way, and the speed-up over server-only with its paired 95% interval where server-only ran too."""
    df = pd.DataFrame(summaries)
    df = df[LATENCY_COLUMNS + [c for c in SPEEDUP_COLUMNS if c in df]].set_index("protocol")
    if SPEEDUP_COLUMNS[0] in df:
        df[SPEEDUP_COLUMNS[0]] = [f"{v:.2f}x [{lo:.2f}, {hi:.2f}]" for v, lo, hi in df[list(SPEEDUP_COLUMNS)].values]
        df = df.drop(columns=list(SPEEDUP_COLUMNS[1:]))
    shown = df.apply(lambda col: col.map(lambda v: "-" if isinstance(v, float) and math.isnan(v)
                                         else f"{v:.1f}" if isinstance(v, float) else v))
    return "latency at the UE (vLLM's benchmark names; speed-up: paired per prompt, 95% interval):\n" + \
        shown.to_string()


def window_table(protocol: str, rounds: pd.DataFrame) -> str | None:
    """``--draft-len auto``: the chosen K's distribution over the rounds, overall and per link state (the CSI in
    force: RTT and uplink rate); None when the rounds have no chosen K (a fixed window)."""
    if "window_k" not in rounds or rounds["window_k"].isna().all():
        return None
    r = rounds.dropna(subset=["window_k"]).astype({"window_k": int})
    share = r["window_k"].value_counts(normalize=True).sort_index()
    shares = ", ".join(f"K={k}: {100 * v:.0f}%" for k, v in share.items())
    lines = [f"chosen K ({protocol}, {len(r)} rounds): {shares}"]
    if {"rtt_ms", "rate_up_mbps"} <= set(r) and r["rtt_ms"].notna().any():
        by = r.groupby([r["rate_up_mbps"].fillna(math.inf), "rtt_ms"])
        for (rate, rtt), g in by:
            q = g["window_k"].quantile([0.25, 0.5, 0.75])
            lines.append(f"  link {rate:g} Mbps / {rtt:g} ms: {len(g)} rounds, K median {q[0.5]:g} "
                         f"(IQR {q[0.25]:g}-{q[0.75]:g}), drafted mean {g['drafted'].mean():.1f}, "
                         f"accepted mean {g['accepted'].mean():.1f}")
    return "\n".join(lines)


def handover_table(protocol: str, rounds: pd.DataFrame) -> str | None:
    """A protocol that may hand rounds to the edge (auto): how many rounds, and committed tokens, the edge generated
    alone against the speculative rounds, overall and per link state; None when no round could be handed over."""
    if "edge_alone" not in rounds or rounds["edge_alone"].isna().all():
        return None
    r = rounds.dropna(subset=["edge_alone"]).astype({"edge_alone": bool})

    def line(g: pd.DataFrame) -> str:
        e = g[g["edge_alone"]]
        return (f"{len(e)} of {len(g)} rounds by the edge alone, {int(e['committed'].sum())} of "
                f"{int(g['committed'].sum())} tokens")
    lines = [f"hand-over ({protocol}): {line(r)}"]
    if {"rtt_ms", "rate_up_mbps"} <= set(r) and r["rtt_ms"].notna().any():
        for (rate, rtt), g in r.groupby([r["rate_up_mbps"].fillna(math.inf), "rtt_ms"]):
            lines.append(f"  link {rate:g} Mbps / {rtt:g} ms: {line(g)}")
    return "\n".join(lines)
