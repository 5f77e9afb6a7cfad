"""Benchmark the SmolLM2 pair's drafter against its target: per-token cost ratio, greedy SD AAL at several K on
held-out prompt sets (lossless-checked), the in-process SD speed-up over target-only greedy decoding, and the peer:
``transformers``' assisted generation with the same drafter, at a fixed K and at its defaults.

Usage: ``python -m scripts.bench.smollm2_drafter [--pair smollm2] [--prompts 20 10] [--draft-lens 2 4 8]
[--peer-draft-lens 4 8] [--threads 1] [--out runs/smollm2/bench_drafter.json]``, after
``python -m wisv.pairs build smollm2``.  The first prompt set (the long-form task's test pool) gives the headline
figures checked against issue 24's goals; the second (generic held-out prompts) is reported beside it with the same
checks.  Timings interleave the methods prompt by prompt (target-only, our loop at each K, the peer at each K and at
its defaults), on one thread, so a drift of the (shared) machine's speed hits them alike.  A benchmark, not a test.
"""
from __future__ import annotations

import copy
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from unittest import mock

import torch

import config
from scripts.cards.smollm2_card import DEFAULT_KINDS
from testbed.common.machine import machine_info
from wisv.decoding.featdraft import FeatureDraftSession, cast_beside_head, read_head_config
from wisv.decoding.leanstep import lean_forward
from wisv.decoding.passrows import load_plan
from wisv.decoding.rejection import confidence_stop
from wisv.decoding.speculative import spec_rows, speculative_generate, target_greedy
from wisv.models.loader import DTYPE_CHOICES, load_pair, resolve_dtype
from wisv.pairs import resolve_pair
from wisv.pairs.drafter import ASSET_DIR
from wisv.records.paired import paired_time_change
from wisv.records.rows import to_frame
from wisv.records.summary import summarize_rounds
from wisv.tasks.evaluate import eos_id, greedy_reference
from wisv.tasks.pools import GENERIC_HELDOUT, pool_path
from wisv.tasks.prompts import prompt_rows

GOALS = {"aal_k8_min": 3.0, "speedup_min": 1.5, "cost_ratio_max": 0.25, "vs_peer_min": 1.0,
         "matches_target": 1.0}  # issue 24's goals


@dataclass
class DrafterBenchConfig:
    """One benchmark (written into the JSON)."""

    pair: str = "smollm2"  # the named pair (python -m wisv.pairs build NAME)
    drafter: str | None = None  # a local HF drafter directory instead of the pair's (None: the pair's)
    drafter_dtype: str = field(default="float32", metadata={"choices": DTYPE_CHOICES})  # the drafter's weights (ours
    #   and the peer's alike; auto: fp32 on CPU); the target stays float32, so greedy SD's output does not move
    feature_head: str | None = None  # also time greedy SD drafting with this feature head at the largest K (None: no)
    head_recompute: bool = False  # also time the head re-reading its whole window every block (no kept cache)
    prompts_files: list[str] = field(default_factory=lambda: [str(pool_path("test")), str(
        GENERIC_HELDOUT)])  # held-out prompt sets (none used in distillation); the first is the headline
    prompts: list[int] = field(default_factory=lambda: [20, 10])  # first N prompts of each set, in order
    draft_lens: list[int] = field(default_factory=lambda: [2, 4, 8])  # K values of our loop (AAL, speed-up)
    peer_draft_lens: list[int] = field(default_factory=lambda: [4, 8])  # fixed K values of the peer (a subset of
    #   --draft-lens); it also runs at its defaults
    peer_defaults: bool = True  # also time the peer at transformers' defaults (its own K and confidence stop)
    stop_below: list[float] = field(default_factory=list, metadata={  # also time our loop at the largest K with
        "min": 0.0, "max": 1.0})  # the peer's confidence stop at each of these top-1 probabilities (none: no)
    pass_rows: str | None = None  # a scripts/bench/pass_rows.py JSON: also time each --stop-below run (with the
    #   feature head, if given) with its verification passes padded by that JSON's target_pad_plan (None: no)
    max_new_tokens: int = 96  # generation budget per prompt, tokens
    threads: int = 1  # torch intra-op threads (drafter and target alike; the testbed's processes use 1)
    cost_steps: int = 40  # decode steps per per-token timing
    profile: int = field(default=0, metadata={  # profile our greedy SD loop at the largest K on the first N
        "min": 0})  # prompts of the first set, after the timings: ours and the peer split into drafter calls, target
    #   calls and the rest, then cProfile's top functions by own time, into the JSON (0: none)
    cost_repeats: int = 5  # interleaved repeats of the per-token timings (median taken)
    out: str = "runs/smollm2/bench_drafter.json"  # the benchmark's JSON (committed ones: results/smollm2/)
    card: str = str(ASSET_DIR / "MODEL_CARD.md")  # the pair's model card, written from the JSON ("": none)
    ceiling: str = "results/smollm2/drafter_ceiling.json"  # AAL vs tokens and depth (scripts/train/drafter_ceiling.py)
    curve: str = "results/smollm2/drafter_curve.json"  # AAL per kind group vs tokens (scripts/train/drafter_curve.py)
    kinds: list[str] = field(default_factory=lambda: list(DEFAULT_KINDS))  # AAL per kind of the drafters
    #   (drafter_curve.py JSONs; the card's)


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


class ForwardTimer:
    """A model's forward calls: how many, and the wall time spent inside them (hooks before and after each)."""

    def __init__(self, model):
        self.n, self.s, self._t0 = 0, 0.0, 0.0
        self.handles = [model.register_forward_pre_hook(self._pre), model.register_forward_hook(self._post)]

    def _pre(self, *_) -> None:
        self.n += 1
        self._t0 = time.perf_counter()

    def _post(self, *_) -> None:
        self.s += time.perf_counter() - self._t0

    def add(self, seconds: float) -> None:
        """One call timed elsewhere (a lean pass: wisv.decoding.leanstep bypasses the module and its hooks)."""
        self.n, self.s = self.n + 1, self.s + seconds

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def timed_lean_passes(timers: dict):
    """The sessions' lean forward (wisv.decoding.leanstep), each call added to its model's ForwardTimer."""
    def lean(model, *args):
        t0 = time.perf_counter()
        out = lean_forward(model, *args)
        timers[model].add(time.perf_counter() - t0)
        return out
    return mock.patch("wisv.decoding.sessions.lean_forward", lean)


@torch.inference_mode()
def peer_generate(pair, prompt_ids: list[int], max_new_tokens: int, k: int | None) -> tuple[list[int], int]:
    """``transformers``' assisted generation (greedy) with the pair's drafter as the assistant: at a fixed ``k``
    (constant schedule, no confidence stop) or, with ``k`` None, at its defaults (the assistant's generation config
    as transformers fills it: 20 tokens, constant schedule, confidence threshold 0.4).  New tokens (cut after EOS)
    and the target's forward calls."""
    eos = eos_id(pair.target)
    own = pair.drafter.generation_config
    gen = copy.deepcopy(own)  # a fresh copy per call: transformers adapts the confidence threshold in place
    if k is not None:
        gen.num_assistant_tokens, gen.num_assistant_tokens_schedule, gen.assistant_confidence_threshold = (
            k, "constant", 0.0)
    pair.drafter.generation_config = gen
    calls = ForwardTimer(pair.target)
    try:
        x = torch.tensor([prompt_ids])
        out = pair.target.generate(x, attention_mask=torch.ones_like(x), assistant_model=pair.drafter,
                                   max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos,
                                   pad_token_id=pair.target.generation_config.pad_token_id)
    finally:
        calls.remove()
        pair.drafter.generation_config = own
    new = out[0, len(prompt_ids):].tolist()
    return (new[:new.index(eos) + 1] if eos in new else new), calls.n


def _coverage(tokens: list[int], kept: set[int] | None) -> tuple[int, int]:
    """(target tokens in the drafter's head vocabulary, target tokens)."""
    return (len(tokens) if kept is None else sum(t in kept for t in tokens)), len(tokens)


def _time_sd(pair, ids: list[int], pid: str, ref: list[int], max_new: int, eos: int, acc: dict, k: int, **kw) -> None:
    """One timed greedy SD run of a prompt at K = ``k`` (``kw``: speculative_generate's make_draft / stop), added
    into ``acc`` (seconds, round rows, outputs equal to ``ref``)."""
    out, s = timed(partial(speculative_generate, pair.drafter, pair.target, ids, max_new_tokens=max_new, draft_len=k,
                           eos_token_id=eos, record_edge=False, **kw))  # no record's edge features: the peer keeps none
    acc["s"], acc["rows"], acc["same"] = acc["s"] + s, acc["rows"] + spec_rows(out, pid, len(ids)), acc["same"] + int(
        out.tokens == ref)
    acc["times"].append(s)


def _acc() -> dict:
    """One method's accumulator: seconds, round rows, outputs equal to target-only's, seconds per prompt."""
    return {"s": 0.0, "rows": [], "same": 0, "times": []}


def sd_runs(pair, rows: list[dict], cfg: DrafterBenchConfig, kept: set[int] | None, head=None,
            plan: dict[int, int] | None = None) -> dict:
    """Per prompt, in turns: target-only (``model.generate``, then ``target_greedy``: the loop's own forward), our
    greedy SD at each K, the peer at each fixed K and at its defaults. AAL, lossless checks, wall times (ours also per
    prompt) and the share of the target's tokens the drafter's head can propose.  ``plan``: also each confidence stop
    (with the feature head, if given) with its verification passes padded by this plan (wisv.decoding.passrows),
    paired by prompt against the same run unpadded and against target-only."""
    eos = eos_id(pair.target)
    base_s, tokens, covered, base_times = 0.0, 0, 0, []  # base_times: target-only by generate, per prompt
    lean = {"s": 0.0, "same": 0}  # target-only through the loop's own forward (target_greedy): the same-forward base
    ours = {k: _acc() for k in cfg.draft_lens}
    peers = {str(k): {"s": 0.0, "calls": 0, "same": 0} for k in cfg.peer_draft_lens}
    peers |= {"defaults": {"s": 0.0, "calls": 0, "same": 0}} if cfg.peer_defaults else {}
    feat = _acc()  # greedy SD with the feature head (``head``), at the largest K
    recompute = _acc()  # the same, re-reading the window every block (head_recompute)
    stops = {p: _acc() for p in cfg.stop_below}  # ours with a confidence stop
    head_stops = {p: _acc() for p in (cfg.stop_below if head is not None else [])}
    padded = {p: _acc() for p in (cfg.stop_below if plan else [])}
    for i, r in enumerate(rows):
        ref, s = timed(partial(greedy_reference, pair.target, r["prompt_ids"], cfg.max_new_tokens))
        base_s, tokens = base_s + s, tokens + len(ref)
        base_times.append(s)
        own, s = timed(partial(target_greedy, pair.target, r["prompt_ids"], max_new_tokens=cfg.max_new_tokens,
                               eos_token_id=eos))
        lean["s"], lean["same"] = lean["s"] + s, lean["same"] + int(own == ref)
        covered += _coverage(ref, kept)[0]
        ids, kmax = r["prompt_ids"], max(cfg.draft_lens)
        one = partial(_time_sd, pair, ids, str(i), ref, cfg.max_new_tokens, eos)
        make_feat = lambda x: FeatureDraftSession(pair.drafter, x, head)  # noqa: E731
        for k in cfg.draft_lens:
            one(ours[k], k)
        for p, acc in stops.items():
            one(acc, kmax, stop=confidence_stop(p))
        if head is not None:
            one(feat, kmax, make_draft=make_feat)
        if head is not None and cfg.head_recompute:
            one(recompute, kmax, make_draft=lambda x: FeatureDraftSession(pair.drafter, x, head, cache_rounds=False))
        for p, acc in head_stops.items():  # the feature head with the same confidence stop
            one(acc, kmax, make_draft=make_feat, stop=confidence_stop(p))
        for p, acc in padded.items():  # the best of ours again, its verification passes padded by the plan
            one(acc, kmax, make_draft=make_feat if head is not None else None, stop=confidence_stop(p), pad_to=plan)
        for name, acc in peers.items():
            (out, calls), s = timed(partial(peer_generate, pair, r["prompt_ids"], cfg.max_new_tokens,
                                            None if name == "defaults" else int(name)))
            acc["s"], acc["calls"], acc["same"] = acc["s"] + s, acc["calls"] + calls, acc["same"] + int(out == ref)
        print(f"[bench] prompt {i + 1}/{len(rows)}: {len(ref)} tokens", flush=True)
    row = partial(_k_row, base_s=base_s, lean_s=lean["s"], n=len(rows))
    by_k = {str(k): row(v) for k, v in ours.items()}
    peer = {name: {"sd_s": round(v["s"], 3), "speedup": round(base_s / v["s"], 4),
                   "target_calls": v["calls"], "matches_target": v["same"] / len(rows),
                   **({"ours_vs_peer": round(v["s"] / ours[int(name)]["s"], 4)} if name != "defaults" else {})}
            for name, v in peers.items()}
    best = max(by_k, key=lambda k: by_k[k]["speedup"])
    return {"target_only_s": round(base_s, 3), "tokens": tokens, "target_only_tok_per_s": round(tokens / base_s, 2),
            "target_only_same_forward_s": round(lean["s"], 3), "same_forward_matches_target": lean["same"] / len(rows),
            "same_forward_vs_generate": round(base_s / lean["s"], 4),
            "head_coverage": round(covered / max(1, tokens), 4), "by_k": by_k, "peer": peer, "best_k": int(best),
            "best_speedup": by_k[best]["speedup"],
            **({"confidence_stop": {str(p): row(v) | {"k": max(cfg.draft_lens)} | (
                {"ours_vs_peer_defaults": round(peers["defaults"]["s"] / v["s"], 4)} if "defaults" in peers else {})
                for p, v in stops.items()}} if stops else {}),
            **({"feature_head": row(feat) | {"k": max(cfg.draft_lens)}} if head is not None
               else {}),
            **({"feature_head_recompute": row(recompute) | {"k": max(cfg.draft_lens)}}
               if head is not None and cfg.head_recompute else {}),
            **({"feature_head_stop": {str(p): row(v) | {"k": max(cfg.draft_lens)}
                                      for p, v in head_stops.items()}} if head_stops else {}),
            **({"padded_stop": {str(p): row(v) | {"k": max(cfg.draft_lens), "feature_head": head is not None,
                                                  "vs_unpadded": paired_time_change(
                                                      (head_stops or stops)[p]["times"], v["times"]),
                                                  "vs_target_only": paired_time_change(base_times, v["times"])}
                                for p, v in padded.items()}} if padded else {})}


def profile_loop(pair, rows: list[dict], cfg: DrafterBenchConfig, top: int = 20) -> dict:
    """Where the time goes, at the largest K: our greedy SD loop and the peer's, in turn per prompt, split into the
    drafter's forward calls, the target's and the rest (``split``); then our loop under cProfile: wall time, and the
    ``top`` functions by own time."""
    import cProfile
    import pstats
    prof, k, eos = cProfile.Profile(), max(cfg.draft_lens), eos_id(pair.target)
    split = time_split(pair, rows, cfg)
    t0 = time.perf_counter()
    prof.enable()
    for r in rows:
        speculative_generate(pair.drafter, pair.target, r["prompt_ids"], max_new_tokens=cfg.max_new_tokens,
                             draft_len=k, eos_token_id=eos, record_edge=False)
    prof.disable()
    wall = time.perf_counter() - t0
    st = pstats.Stats(prof)
    funcs = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]  # (file, line, name) -> (cc, nc, tt, ct, ..)
    return {"prompts": len(rows), "k": k, "split": split, "wall_s": round(wall, 3), "calls": st.total_calls,
            "top_by_own_time": [{"function": f"{Path(f).name}:{line}:{name}", "calls": nc, "own_s": round(tt, 3),
                                 "cum_s": round(ct, 3)} for (f, line, name), (_, nc, tt, ct, _) in funcs]}


def time_split(pair, rows: list[dict], cfg: DrafterBenchConfig) -> dict:
    """Our greedy SD loop and the peer at the largest K, in turn per prompt (no profiler): wall seconds, the
    drafter's and the target's forward calls (count, seconds, ms a call) and the rest (the loop's own work)."""
    k, eos = max(cfg.draft_lens), eos_id(pair.target)
    runs = {"ours": lambda ids: speculative_generate(pair.drafter, pair.target, ids, max_new_tokens=cfg.max_new_tokens,
                                                     draft_len=k, eos_token_id=eos, record_edge=False),
            "peer": lambda ids: peer_generate(pair, ids, cfg.max_new_tokens, k)}
    acc = {name: {"wall": 0.0, "drafter": [0, 0.0], "target": [0, 0.0]} for name in runs}
    for r in rows:
        for name, run in runs.items():
            timers = {"drafter": ForwardTimer(pair.drafter), "target": ForwardTimer(pair.target)}
            try:
                with timed_lean_passes({pair.drafter: timers["drafter"], pair.target: timers["target"]}):
                    _, s = timed(partial(run, r["prompt_ids"]))
            finally:
                for t in timers.values():
                    t.remove()
            a = acc[name]
            a["wall"] += s
            for m, t in timers.items():
                a[m] = [a[m][0] + t.n, a[m][1] + t.s]
    return {name: _split_row(a) for name, a in acc.items()}


def _split_row(a: dict) -> dict:
    """One method's split: wall and rest seconds, and per model (drafter, target) its calls, seconds, ms a call."""
    row = {"wall_s": round(a["wall"], 3), "rest_s": round(a["wall"] - a["drafter"][1] - a["target"][1], 3)}
    for m in ("drafter", "target"):
        n, s = a[m]
        row |= {f"{m}_calls": n, f"{m}_s": round(s, 3), f"{m}_ms_per_call": round(1e3 * s / max(1, n), 3)}
    return row


def _k_row(acc: dict, *, base_s: float, lean_s: float, n: int) -> dict:
    """One method's AAL, rounds and seconds; its speed-up over target-only by ``model.generate`` (``base_s``) and
    over target-only through the loop's own forward (``lean_s``: what speculation alone buys)."""
    s = summarize_rounds(to_frame(acc["rows"]))
    return {"aal": round(s["aal"], 4), "rounds": len(acc["rows"]), "sd_s": round(acc["s"], 3),
            "speedup": round(base_s / acc["s"], 4), "speedup_same_forward": round(lean_s / acc["s"], 4),
            "matches_target": acc["same"] / n, "prompt_s": [round(t, 3) for t in acc["times"]]}


def goals(sd: dict, cost_ratio: float) -> dict:
    """Issue 24's goals on one prompt set: measured value and whether it is met."""
    k8 = sd["by_k"].get("8", {}).get("aal", float("nan"))
    vs = [v["ours_vs_peer"] for v in sd["peer"].values() if "ours_vs_peer" in v]
    same = min([v["matches_target"] for v in sd["by_k"].values()] + [v["matches_target"] for v in sd["peer"].values()])
    vals = {"aal_k8": (k8, k8 >= GOALS["aal_k8_min"]),
            "speedup_best_k": (sd["best_speedup"], sd["best_speedup"] >= GOALS["speedup_min"]),
            "cost_ratio": (cost_ratio, cost_ratio <= GOALS["cost_ratio_max"]),
            "ours_vs_peer_min": (min(vs) if vs else None, bool(vs) and min(vs) >= GOALS["vs_peer_min"]),
            "matches_target_min": (same, same >= GOALS["matches_target"])}
    return {k: {"value": v, "met": bool(m)} for k, (v, m) in vals.items()}


def parse_args(argv: list[str] | None = None) -> DrafterBenchConfig:
    return config.parse(DrafterBenchConfig, argv, description=__doc__.splitlines()[0])


def prompt_sets(tok, cfg: DrafterBenchConfig) -> dict[str, list[dict]]:
    """Each prompt file's first N rows, keyed by the file's name."""
    if len(cfg.prompts) != len(cfg.prompts_files):
        raise ValueError(f"--prompts gives {len(cfg.prompts)} counts for {len(cfg.prompts_files)} prompt files")
    if not set(cfg.peer_draft_lens) <= set(cfg.draft_lens):
        raise ValueError(f"--peer-draft-lens {cfg.peer_draft_lens}: each must be one of --draft-lens {cfg.draft_lens}")
    return {f"{Path(f).parent.name}/{Path(f).name}": prompt_rows(tok, "test", n, f)
            for f, n in zip(cfg.prompts_files, cfg.prompts)}


def kept_ids(drafter) -> set[int] | None:
    """The drafter head's vocabulary (None: the full vocabulary)."""
    ids = getattr(drafter.get_output_embeddings(), "kept_ids", None)
    return None if ids is None else set(ids.tolist())


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_args(argv)
    torch.set_num_threads(cfg.threads)
    load_start = os.getloadavg()[0]
    if cfg.feature_head:
        read_head_config(cfg.feature_head)  # a bad directory fails before any timing
    plan = load_plan(cfg.pass_rows) if cfg.pass_rows else None
    paths = resolve_pair(cfg.pair)
    pair = load_pair(cfg.drafter or paths.drafter, paths.target)
    head = cast_beside_head(pair.drafter, cfg.feature_head, resolve_dtype(cfg.drafter_dtype, "cpu"))
    sets = prompt_sets(pair.tokenizer, cfg)
    c = cost(pair, cfg)
    print(f"[bench] cost: {c}", flush=True)
    kept = kept_ids(pair.drafter)
    by_set = {name: sd_runs(pair, rows, cfg, kept, head, plan) for name, rows in sets.items()}
    prof = profile_loop(pair, next(iter(sets.values()))[:cfg.profile], cfg) if cfg.profile else None
    result = {"config": asdict(cfg), **c, "pad_plan": plan, "headline_set": next(iter(by_set)), "by_set": by_set,
              "goals": GOALS, "meets": {n: goals(sd, c["cost_ratio"]) for n, sd in by_set.items()},
              "drafter": {"layers": pair.drafter.config.num_hidden_layers, "params": pair.drafter.num_parameters(),
                          "dtype": str(pair.drafter.dtype).removeprefix("torch."),
                          "vocab_size": int(pair.drafter.config.vocab_size),
                          "head_rows": int(pair.drafter.get_output_embeddings().weight.shape[0]),
                          "target_params": pair.target.num_parameters()},
              "profile": prof, "machine": machine_info(),
              "load_avg_1min": {"start": load_start, "end": os.getloadavg()[0]}}  # the bench's own thread is 1.0
    Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cfg.out).write_text(json.dumps(result, indent=1) + "\n")
    if cfg.card:
        from scripts.cards.smollm2_card import model_card
        Path(cfg.card).write_text(model_card(result, cfg.ceiling, cfg.curve, cfg.kinds))
    print(json.dumps({"cost_ratio": c["cost_ratio"], "meets": result["meets"]}
                     | {n: {"by_k": v["by_k"], "peer": v["peer"], "coverage": v["head_coverage"]}
                        | ({"feature_head": v["feature_head"]} if "feature_head" in v else {})
                        | ({k: v[k] for k in ("confidence_stop", "feature_head_stop", "feature_head_recompute",
                                              "padded_stop")
                            if k in v})
                        for n, v in by_set.items()}, indent=1))
    return result


if __name__ == "__main__":  # bad input (a value, a missing or unwritable path, an unbuilt pair) is one line, exit 2
    sys.exit(config.run_reporting("python -m scripts.bench.smollm2_drafter", main, (ValueError, OSError)))
