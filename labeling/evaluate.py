"""Stage 5 (evaluate): the speculative loop with the trained heads on held-out prompts, swept over tau x channel.

For each head variant ("csi", and the "nocsi" ablation), channel regime (name -> rate, RTT) and tau, run
WISV speculative decoding at K = draft_len on the test prompts, with the regime's CSI given to the head.
Greedy SD (tau = 0) is the baseline; a head without CSI input is run once per tau and its rounds are
reused for every channel.  Per (variant, channel, tau): accuracy, AAL, rounds per prompt, and the
*predicted* end-to-end latency per prompt from the latency model (wisv.timing.roundtime; the pair's own
dimensions, the configured UE/edge hardware profiles and the regime's link; ``protocol`` payloads, the
greedy baseline with greedy payloads).  Writes evaluate.csv, accuracy_vs_tau.png, aal_vs_tau.png and
headline.json: the chosen tau and the gains there.

Every row also has matches_target, drift (ROUGE-L F1) and fluency (the target's perplexity ratio) against greedy
SD's output, which is the target's own (wisv.tasks.textquality).

The chosen tau is the largest swept tau that keeps the poor channel's accuracy within ``max_acc_drop_pts``
of greedy SD and its fluency ratio at most ``max_fluency_ratio``, and is at most ``tau_max`` (default 0.5, the
decision boundary of the class-balanced head: above it the head accepts mismatches it rates more likely than not
to need repair).  Without the cap a
task whose accuracy never drops inside the sweep (the toy task) would pick the top of the grid, where
every policy accepts every mismatch it is unsure of and channel awareness no longer shows.
"""
from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from channel.csi import CSI
from labeling.config import EvalConfig
from labeling.plots import plot_fig3, plot_fig5, plot_sweep
from labeling.store import EPISODES, EVAL_CSV, HEADS, load_config, require, save_config, stage_path
from wisv.decoding.sessions import VerifySession
from wisv.decoding.speculative import MismatchPolicy, RejectAll, SpecOutput, spec_rows, speculative_generate
from wisv.head.model import HeadPolicy
from wisv.head.store import load_head
from wisv.models.loader import ModelPair, load_pair
from wisv.pairs import apply_pair
from wisv.records.paired import paired_accuracy
from wisv.records.rows import to_frame
from wisv.records.summary import summarize_rounds
from wisv.tasks.datasets import check_dataset
from wisv.tasks.evaluate import accuracy
from wisv.tasks.jsonl import read_jsonl
from wisv.tasks.prompts import prompt_rows
from wisv.tasks.qa import check_answer
from wisv.tasks.textquality import text_quality, token_nll
from wisv.timing.compute import ModelDims, verify_flops
from wisv.timing.hardware import get_profile
from wisv.timing.latency import PayloadBits
from wisv.timing.roundtime import Deployment, rounds_s


def channel_csi(channels: dict) -> dict[str, CSI]:
    return {name: CSI.symmetric(rate, rtt) for name, (rate, rtt) in channels.items()}


def deployment(pair: ModelPair, cfg: EvalConfig, head_hidden: int, csi_dim: int) -> Deployment:
    """The pair's dimensions on the configured hardware profiles, paper payload packing."""
    dd, dt = ModelDims.from_hf_config(pair.drafter.config), ModelDims.from_hf_config(pair.target.config)
    return Deployment(dd, dt, get_profile(cfg.ue_profile), get_profile(cfg.edge_profile),
                      PayloadBits.paper(vocab=dd.vocab, d_d=dd.d_model), head_hidden=head_hidden, csi_dim=csi_dim)


def predicted_latency_s(outs: list[SpecOutput], prompt_lens: list[int], protocol: str, csi: CSI,
                        dep: Deployment) -> float:
    """Mean per-prompt end-to-end latency (eq. 22) of the recorded rounds under the model (wisv.records.summary)."""
    records, latency, memo = [], [], {}
    for i, (out, plen) in enumerate(zip(outs, prompt_lens)):
        recs = spec_rows(out, str(i), plen)  # with the prefix length at each round
        latency.append(rounds_s([(r.drafted, r.prefix_len, r.mismatches) for r in recs], protocol, lambda _t: csi,
                                dep, memo=memo))
        records += recs
    return summarize_rounds(to_frame(records), pd.DataFrame({"latency_s": latency}))["latency_s"]


def mismatch_free(out: SpecOutput) -> bool:
    """True when no drafted token of any round differed from the target's argmax: the head was never asked."""
    return not any(r.mismatches for r in out.rounds)


def run_loop(pair: ModelPair, rows: list[dict], cfg: EvalConfig, policy: MismatchPolicy, tau: float, csi: CSI | None,
             desc: str, base: list[SpecOutput] | None = None) -> list[SpecOutput]:
    """The WISV loop over the rows.  ``base``: greedy SD's outputs of the same rows at the same K; a row whose
    greedy run met no mismatch reuses that output, since the policy is only asked at mismatches and the run
    would repeat it token for token (most QA answers of the SmolLM2 pair are drafted without one)."""
    layer = policy.hidden_layer  # a head reads the layer it was trained on
    outs = []
    for i, row in enumerate(tqdm(rows, desc=desc, leave=False)):
        if base is not None and mismatch_free(base[i]):
            outs.append(base[i])
            continue
        outs.append(speculative_generate(pair.drafter, pair.target, row["prompt_ids"],
                                         max_new_tokens=cfg.max_new_tokens, draft_len=cfg.draft_len, rule="wisv",
                                         policy=policy, tau=tau, csi=csi, hidden_layer=layer))
    return outs


def metrics(outs: list[SpecOutput], rows: list[dict], tok, base: list[SpecOutput] | None = None,
            nll=None, ext=None) -> dict[str, float]:
    """Accuracy, AAL and rounds per prompt (wisv.records.summary over the runs' round records), accepted mismatches;
    against ``base`` (greedy SD's outputs, equal to the target's own): the prompts lost and gained with the bootstrap
    95% interval of the accuracy delta (wisv.records.paired), matches_target, drift (ROUGE-L F1) and
    fluency (the target's perplexity ratio; ``nll(i, tokens)``: the target's per-token NLL for row i) and external
    fluency (a third LM's perplexity ratio; ``ext(prompt text, text)``: its per-token NLL, wisv.pairs.scorer)."""
    records = [rec for i, (o, r) in enumerate(zip(outs, rows)) for rec in spec_rows(o, str(i), len(r["prompt_ids"]))]
    s = summarize_rounds(to_frame(records), pd.DataFrame({"n_tokens": [len(o.tokens) for o in outs]}))
    texts = [tok.decode(o.tokens) for o in outs]
    out = {"accuracy": accuracy(texts, [r["answer"] for r in rows]),
           "aal": s["aal"], "rounds_per_prompt": s["rounds_per_prompt"],
           "accepted_mismatches_per_prompt": sum(sum(j < r.accepted for j in r.mismatches)
                                                 for o in outs for r in o.rounds) / max(1, len(outs))}
    if base is not None:
        out["matches_target"] = sum(o.tokens == b.tokens for o, b in zip(outs, base)) / max(1, len(outs))
        refs = [tok.decode(b.tokens) for b in base]
        answers = [r["answer"] for r in rows]
        right = lambda ts: np.array([check_answer(t, a) for t, a in zip(ts, answers)])  # noqa: E731
        pa = paired_accuracy(right(refs), right(texts))  # prompt by prompt against greedy SD
        out |= {"lost": pa.lost, "gained": pa.gained, "delta_ci_low": pa.ci_low, "delta_ci_high": pa.ci_high}
        nlls = ref_nlls = ext_nlls = ext_ref_nlls = None
        if nll is not None:
            nlls = [nll(i, o.tokens) for i, o in enumerate(outs)]
            ref_nlls = [nll(i, b.tokens) for i, b in enumerate(base)]
        if ext is not None:
            plain = lambda ids: tok.decode(list(ids), skip_special_tokens=True)  # noqa: E731  (as a person reads it)
            ctx = [plain(r["prompt_ids"]) for r in rows]
            ext_nlls = [ext(c, plain(o.tokens)) for c, o in zip(ctx, outs)]
            ext_ref_nlls = [ext(c, plain(b.tokens)) for c, b in zip(ctx, base)]
        out |= text_quality(texts, refs, nlls, ref_nlls, ext_nlls, ext_ref_nlls)
    return out


def target_scorer(pair: ModelPair, rows: list[dict]):
    """nll(i, tokens): the target's per-token NLL of an output of row i, cached per (row, output)."""
    cache: dict[tuple[int, tuple[int, ...]], list[float]] = {}

    def nll(i: int, tokens: list[int]) -> list[float]:
        key = (i, tuple(tokens))
        if key not in cache:
            cache[key] = token_nll(pair.target, [rows[i]["prompt_ids"]], [list(tokens)])[0] if tokens else []
        return cache[key]
    return nll


def sweep(pair: ModelPair, rows: list[dict], cfg: EvalConfig, heads: dict, chans: dict[str, CSI]) -> pd.DataFrame:
    """One row per (variant, channel, tau), plus the greedy baseline rows (variant 'greedy', tau 0)."""
    plens = [len(r["prompt_ids"]) for r in rows]
    recs = []
    base = run_loop(pair, rows, cfg, RejectAll(), 0.0, None, "greedy SD")
    nll = target_scorer(pair, rows)
    dep, base_m = deployment(pair, cfg, 1, 1), metrics(base, rows, pair.tokenizer, base, nll)
    for ch, c in chans.items():
        recs.append({"variant": "greedy", "channel": ch, "tau": 0.0, **base_m,
                     "latency_s": predicted_latency_s(base, plens, "greedy", c, dep)})
    for variant, head in heads.items():
        dep, policy = deployment(pair, cfg, head.cfg.hidden, max(1, head.cfg.csi_dim)), HeadPolicy(head)
        for tau in tqdm(cfg.taus, desc=f"tau sweep ({variant})"):
            shared = None if head.cfg.csi_dim else run_loop(pair, rows, cfg, policy, tau, None, f"{variant} tau={tau}",
                                                            base)
            # a head without CSI: one run for all channels
            shared_m = shared and metrics(shared, rows, pair.tokenizer, base, nll)
            for ch, c in chans.items():
                outs = shared or run_loop(pair, rows, cfg, policy, tau, c, f"{variant} {ch} tau={tau}", base)
                recs.append({"variant": variant, "channel": ch, "tau": tau,
                             **(shared_m or metrics(outs, rows, pair.tokenizer, base, nll)),
                             "latency_s": predicted_latency_s(outs, plens, cfg.protocol, c, dep)})
    return pd.DataFrame(recs)


QUALITY = ("matches_target", "drift_rouge_l", "fluency_ppl_ratio")  # text quality against the target's own output


def headline(df: pd.DataFrame, cfg: EvalConfig, poor: str, good: str) -> dict:
    """The chosen tau (largest with poor-channel accuracy within max_acc_drop_pts of greedy) and the gains there;
    ``poor`` and ``good`` name the channels of lowest and highest quality q."""
    g = df[(df.variant == "greedy") & (df.channel == poor)].iloc[0]
    ok = df[(df.variant == "csi") & (df.channel == poor)
            & (df.accuracy >= g.accuracy - cfg.max_acc_drop_pts / 100 - 1e-9)]
    if "fluency_ppl_ratio" in df:  # and a text the target finds nearly as likely as its own (nan: not measured)
        ok = ok[~(ok.fluency_ppl_ratio > cfg.max_fluency_ratio)]
    cand = ok[ok.tau <= cfg.tau_max + 1e-12]
    if cand.empty:
        return {"tau": None, "note": f"no swept tau <= {cfg.tau_max} keeps {poor}-channel accuracy within "
                                     f"{cfg.max_acc_drop_pts} pt and fluency ratio <= {cfg.max_fluency_ratio}"}
    tau = float(cand.tau.max())
    out = {"tau": tau, "largest_tau_within_accuracy": float(ok.tau.max()), "poor_channel": poor, "good_channel": good,
           "draft_len": cfg.draft_len, "greedy_accuracy": float(g.accuracy), "greedy_aal": float(g.aal),
           "greedy_rounds_per_prompt": float(g.rounds_per_prompt)}
    for variant in ("csi", "nocsi"):
        for ch in (poor, good):
            r = df[(df.variant == variant) & (df.channel == ch) & (df.tau == tau)]
            if r.empty:
                continue
            r = r.iloc[0]
            gr = df[(df.variant == "greedy") & (df.channel == ch)].iloc[0]
            out[f"{variant}_{'poor' if ch == poor else 'good'}"] = {"accuracy": float(r.accuracy), "aal": float(r.aal),
                                      "rounds_per_prompt": float(r.rounds_per_prompt), "latency_s": float(r.latency_s),
                                      "aal_gain": float(r.aal / gr.aal - 1),
                                      "rounds_change": float(r.rounds_per_prompt / gr.rounds_per_prompt - 1),
                                      "latency_change": float(r.latency_s / gr.latency_s - 1),
                                      "accepted_mismatches_per_prompt": float(r.accepted_mismatches_per_prompt),
                                      **{k: float(r[k]) for k in QUALITY if k in r}}
    return out


@torch.no_grad()
def overhead(pair: ModelPair, head, rows: list[dict], cfg: EvalConfig, reps: int = 50) -> dict:
    """Decision-head cost for one mismatch vs one target verification pass (K + 1 tokens), FLOPs and time."""
    v = VerifySession(pair.target, rows[0]["prompt_ids"])
    draft = rows[0]["prompt_ids"][: cfg.draft_len] or [0]
    policy = HeadPolicy(head)
    hd, ht = torch.zeros(1, head.cfg.d_draft), torch.zeros(1, head.cfg.d_target)
    t0 = time.perf_counter()
    for _ in range(reps):
        policy.reject_probs(hd, ht, [0], CSI.symmetric(2, 50))
    t_head = (time.perf_counter() - t0) / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        v.verify(draft)
        v.rollback(len(v.seq) - 1)
    t_verify = (time.perf_counter() - t0) / reps
    dims = ModelDims.from_hf_config(pair.target.config)
    f_verify = verify_flops(dims, len(v.seq), len(draft) + 1)
    return {"head_flops_per_query": head.cfg.flops_per_query(), "verify_flops": f_verify,
            "flops_ratio": head.cfg.flops_per_query() / f_verify, "head_s": t_head, "verify_s": t_verify,
            "time_ratio": t_head / t_verify, "verify_block_tokens": len(draft) + 1, "prefix_tokens": len(v.seq)}


def held_out_rows(cfg: EvalConfig, tok, ccfg: dict) -> list[dict]:
    """The test rows: the first ``--prompts`` of the test split, the prompts file or ``--dataset``; of a dataset the
    collect stage also read, only the questions it did not take (held out means held out)."""
    if not cfg.dataset:
        return prompt_rows(tok, "test", cfg.prompts, cfg.prompts_file, chat_template=cfg.chat_template)
    rows = prompt_rows(tok, "test", None, dataset=cfg.dataset, chat_template=cfg.chat_template, first_turn_only=True)
    seen = ({str(e["prompt_id"]) for e in read_jsonl(stage_path(cfg.run_dir, EPISODES))}
            if ccfg.get("dataset") == cfg.dataset else set())
    rows = [r for r in rows if str(r["prompt_id"]) not in seen][:cfg.prompts]
    if not rows:
        raise ValueError(f"--dataset {cfg.dataset}: every question was taken by the collect stage; none is held out")
    return rows


def run(cfg: EvalConfig) -> pd.DataFrame:
    """Sweep, write evaluate.csv, the plots and headline.json; print the table and the headline."""
    torch.set_num_threads(1)
    cfg = apply_pair(cfg)
    if cfg.dataset:
        check_dataset(cfg.dataset, cfg.prompts_file)  # a bad name or row: one line before any model loads
    ccfg = load_config(cfg.run_dir, "collect")
    pair = load_pair(cfg.drafter or ccfg["drafter"], cfg.target or ccfg["target"], cfg.device)
    heads = {v: load_head(require(cfg.run_dir, HEADS, "train", variant=v)) for v in cfg.variants}
    rows = held_out_rows(cfg, pair.tokenizer, ccfg)
    chans = channel_csi(cfg.channels)
    if len(chans) < 2:
        raise ValueError("evaluate needs at least two channels (e.g. good=500/5 poor=2/50)")
    by_q = sorted(chans, key=lambda ch: chans[ch].quality())
    df = sweep(pair, rows, cfg, heads, chans)
    df.to_csv(stage_path(cfg.run_dir, EVAL_CSV), index=False)
    plot_sweep(df, stage_path(cfg.run_dir, "accuracy_vs_tau.png"), "accuracy", "accuracy")
    plot_sweep(df, stage_path(cfg.run_dir, "aal_vs_tau.png"), "aal", f"AAL (K = {cfg.draft_len})")
    plot_fig3(df, stage_path(cfg.run_dir, "fig3_accuracy_vs_tau.png"), (by_q[0], by_q[-1]))
    plot_fig5(df, stage_path(cfg.run_dir, "fig5_csi_vs_blind.png"))
    head_line = headline(df, cfg, poor=by_q[0], good=by_q[-1])
    head_line["overhead"] = overhead(pair, next(iter(heads.values())), rows, cfg)
    stage_path(cfg.run_dir, "headline.json").write_text(json.dumps(head_line, indent=1))
    save_config(cfg.run_dir, "evaluate", cfg)
    with pd.option_context("display.width", 160, "display.max_rows", 200):
        print(df.round(4).to_string(index=False))
    print(json.dumps(head_line, indent=1))
    return df
