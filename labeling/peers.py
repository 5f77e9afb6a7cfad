"""Stage (peers): every judge side by side, in-process, on the same held-out prompts and links, at its dev-chosen tau.

For each judge directory (``python -m labeling judges``), each channel and greedy SD: the WISV loop at K =
``draft_len`` with the channel's CSI given to the judge (a fixed-tau judge runs once for every channel), and per run:
accuracy, AAL, rounds per prompt, generated tokens per prompt, rounds per 100 generated tokens, accepted mismatches,
matches_target, ROUGE-L drift, the target's perplexity ratio and a third LM's (``--fluency-model``,
wisv.pairs.scorer) against greedy SD's output, and the *predicted*
latency per prompt under the latency model with the payloads of the protocol the judge needs (ef for a judge of
edge features, fh for one that reads the drafter's hidden states; greedy's for greedy SD).  No choice is made here:
the taus come from the judges' dev slice (``--taus`` adds each judge's frontier over tau beside it, for a report
of what a tau would cost, not to choose one).  Writes peers.csv and its config.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from labeling.config import CHANNELS_TEXT, EvalConfig
from labeling.evaluate import channel_csi, deployment, metrics, predicted_latency_s, run_loop, target_scorer
from labeling.store import save_config
from wisv.decoding.speculative import RejectAll
from wisv.head.store import is_policy_dir, load_policy_dir
from wisv.models.loader import load_pair
from wisv.pairs import PAIR_NAMES, apply_pair
from wisv.pairs.scorer import SCORERS, resolve_scorer
from wisv.tasks.prompts import prompt_rows
from wisv.timing.protodesc import servable


@dataclass
class PeersConfig:
    """In-process peer table: each judge at its own tau on each channel, against greedy SD."""

    heads_dir: str = "wisv/assets/smollm2-judges"  # judge directories (labeling judges' --out-dir)
    heads: tuple[str, ...] = ()  # judge names to run (empty: every judge in heads_dir)
    paper_head: str | None = "wisv/assets/smollm2-head"  # the WISV-paper head run beside them as wisv-paper (None: not)
    results_dir: str = "runs/judges"  # where peers.csv goes
    pair: str | None = field(default="smollm2", metadata={
        "choices": PAIR_NAMES})  # named pair (python -m wisv.pairs build NAME)
    drafter: str | None = None  # drafter model dir (None: the pair's)
    target: str | None = None  # target model dir (None: the pair's)
    prompts_file: str | None = None  # JSONL held-out prompts (None: the pair's test pool)
    prompts: int = field(default=40, metadata={"min": 1})  # held-out prompts
    draft_len: int = field(default=8, metadata={"min": 1})  # K
    max_new_tokens: int = field(default=128, metadata={"min": 1})  # generation budget per prompt
    channels: dict[str, tuple[float, float]] = field(
        default_factory=lambda: {"good": (200.0, 5.0), "poor": (3.0, 45.0)},
        metadata=CHANNELS_TEXT)  # NAME=RATE_MBPS/RTT_MS
    ue_profile: str = "jetson-agx-orin"  # hardware profile of the drafter (predicted latency)
    edge_profile: str = "a40"  # hardware profile of the verifier (predicted latency)
    taus: tuple[float, ...] = field(default=(), metadata={  # also run each judge at these taus: its frontier over
        "min": 0})  # tau (a link-mode judge: its tau on the poor link, scaled by t_link on the others)
    device: str = "cpu"  # torch device
    fluency_model: str = field(default="auto",  # the third LM of fluency_ext_ppl_ratio (auto: where built; none: off)
                               metadata={"choices": ("auto", "none", *SCORERS)})


def judge_dirs(cfg: PeersConfig) -> dict[str, Path]:
    """The judges to run, by name."""
    root = Path(cfg.heads_dir)
    found = {d.name: d for d in sorted(root.iterdir()) if is_policy_dir(d)} if root.is_dir() else {}
    if not found:
        raise ValueError(f"{root}: no judge directories (run `python -m labeling judges` first)")
    missing = sorted(set(cfg.heads) - set(found))
    if missing:
        raise ValueError(f"--heads {missing}: not in {root} (it has {sorted(found)})")
    return {n: found[n] for n in (cfg.heads or found)}


def policies(cfg: PeersConfig) -> dict[str, tuple]:
    """name -> (policy, tau, the protocol it needs (the first that serves it: fh for a head that reads the drafter's
    hidden states, else ef), whether its decisions depend on the link)."""
    paths = ({"wisv-paper": cfg.paper_head} if cfg.paper_head else {}) | judge_dirs(cfg)
    out = {}
    for name, path in paths.items():
        policy, tau = load_policy_dir(path)
        out[name] = (policy, tau, servable("h_draft" in policy.inputs)[0], "csi" in policy.inputs)
    return out


def run(cfg: PeersConfig) -> pd.DataFrame:
    """Run every judge and greedy SD; write and print peers.csv."""
    torch.set_num_threads(1)
    heads = policies(cfg)  # a bad --heads-dir or --heads fails now, before any generation
    cfg = apply_pair(cfg)
    pair = load_pair(cfg.drafter, cfg.target, cfg.device)
    rows = prompt_rows(pair.tokenizer, "test", cfg.prompts, cfg.prompts_file)
    ecfg = EvalConfig(draft_len=cfg.draft_len, max_new_tokens=cfg.max_new_tokens, ue_profile=cfg.ue_profile,
                      edge_profile=cfg.edge_profile)
    chans, plens = channel_csi(cfg.channels), [len(r["prompt_ids"]) for r in rows]
    dep, nll = deployment(pair, ecfg, 1, 1), target_scorer(pair, rows)
    ext = resolve_scorer(cfg.fluency_model, device=cfg.device)  # the third LM's fluency scorer (None: off or not built)
    base = run_loop(pair, rows, ecfg, RejectAll(), 0.0, None, "greedy SD")
    recs = [_row("greedy SD", "greedy", ch, 0.0, base, rows, pair, base, nll, plens, c, dep, ext)
            for ch, c in chans.items()]
    for name, (policy, tau, proto, per_link) in heads.items():
        for t, label in [(tau, name)] + [(t, f"{name} tau={t:g}") for t in cfg.taus]:
            shared = None if per_link else run_loop(pair, rows, ecfg, policy, t, None, label, base)
            for ch, c in chans.items():
                outs = shared or run_loop(pair, rows, ecfg, policy, t, c, f"{label} {ch}", base)
                in_force = policy.threshold(t, c)
                recs.append(_row(label, proto, ch, in_force, outs, rows, pair, base, nll, plens, c, dep, ext))
    df = pd.DataFrame(recs)
    out = Path(cfg.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "peers.csv", index=False)
    save_config(out, "peers", cfg)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(df.round(3).to_string(index=False))
    return df


def _row(name, proto, ch, tau, outs, rows, pair, base, nll, plens, c, dep, ext=None) -> dict:
    m = metrics(outs, rows, pair.tokenizer, base, nll, ext)
    tokens = sum(len(o.tokens) for o in outs) / max(1, len(outs))
    return {"judge": name, "protocol": proto, "channel": ch, "tau_in_force": tau, **m, "tokens_per_prompt": tokens,
            "rounds_per_100_tokens": 100 * m["rounds_per_prompt"] / max(tokens, 1e-9),
            "latency_s": predicted_latency_s(outs, plens, proto, c, dep)}
