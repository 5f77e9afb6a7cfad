"""The label stage's cached engine: one forward per episode serves every forced continuation of its mismatches.

A forward over an episode's prompt + output (the target's own greedy path) gives the target's NLL of each of its
own tokens, of each draft token where it put its own, and the KV cache of every prefix ``prompt + output[:j]``.
A mismatch's forced continuation then starts from that cache's first ``len(prompt) + j`` positions: the rows of a
batch are left-padded into one preallocated cache (never re-prefilled), fed their draft tokens, and decoded
greedily one token per step; a row is done after its ``steps`` tokens or EOS, and the batch sheds done rows as
they pile up.  The batched engine (labeling/label.py) re-prefills prompt + prefix for every mismatch instead.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from tqdm import tqdm
from transformers import DynamicCache, PreTrainedModel

from wisv.serving.batchverify import SlabLayer
from wisv.tasks.evaluate import eos_id

GROUP_BATCHES = 4  # episodes are passed in groups of about this many batches of mismatches, sorted by length
SHED_FRACTION = 0.75  # the batch drops its done rows once at most this fraction of its rows is still running


@dataclass
class Job:
    """One mismatch to force."""

    episode: int  # index into the episodes
    position: int  # j: index of the mismatch in the episode's output tokens
    draft_id: int  # the drafter's token at j, forced in place of the target's
    steps: int  # greedy tokens to generate after the draft token (fewer after EOS)


@dataclass
class Forced:
    """What a mismatch's label is computed from."""

    cont: list[int]  # the target's greedy tokens after the forced draft token (cut after EOS)
    cont_nll: list[float]  # [len(cont)] their NLLs under the target, nats
    nll_draft: float  # the target's NLL of the draft token where it put its own, nats
    own_nll: list[float]  # [len(output)] the target's NLLs of its own output tokens, nats


@dataclass
class EpisodePass:
    """One forward over an episode's prompt + output."""

    cache: DynamicCache  # keys and values of every position, [1, H, L, D] per layer
    own_nll: list[float]  # [len(output)] NLL of each output token, nats
    draft_nll: dict[tuple[int, int], float]  # (position j, draft id) -> NLL of that token in place of output[j]


@torch.no_grad()
def episode_pass(model: PreTrainedModel, prompt: list[int], output: list[int],
                 queries: list[tuple[int, int]]) -> EpisodePass:
    """The target's forward over prompt + output: its cache, its own tokens' NLLs and the queried draft tokens'."""
    ids = torch.tensor([list(prompt) + list(output)], dtype=torch.long, device=model.device)  # [1, L]
    out = model(input_ids=ids, use_cache=True, logits_to_keep=len(output) + 1)
    logp = out.logits[0, :len(output)].float().log_softmax(-1)  # [n_out, V]: row j predicts output[j]
    own = -logp[torch.arange(len(output)), torch.tensor(output, dtype=torch.long)]  # [n_out]
    return EpisodePass(out.past_key_values, own.tolist(), {(j, d): -float(logp[j, d]) for j, d in queries})


def stack_prefixes(caches: list[DynamicCache], lengths: list[int], room: int) -> DynamicCache:
    """One batched cache: the first lengths[b] positions of caches[b], left-padded to the longest (zeros, masked),
    with ``room`` free positions after them that the decode writes in place."""
    width = max(lengths)
    batched, layers = DynamicCache(), []
    for li, ref in enumerate(caches[0].layers):
        shape = (len(caches), ref.keys.shape[1], width + room, ref.keys.shape[3])  # [B, H, W + T, D]
        keys, values = ref.keys.new_zeros(shape), ref.values.new_zeros(shape)
        for b, (c, n) in enumerate(zip(caches, lengths)):
            keys[b, :, width - n:width] = c.layers[li].keys[0, :, :n]
            values[b, :, width - n:width] = c.layers[li].values[0, :, :n]
        layers.append(SlabLayer(keys, values, width))  # drops done rows in place
    batched.layers = layers
    return batched


@torch.no_grad()
def cached_greedy(model: PreTrainedModel, caches: list[DynamicCache], lengths: list[int], first: list[int],
                  steps: list[int]) -> tuple[list[list[int]], list[list[float]]]:
    """Greedy continuations after forcing first[b] onto the first lengths[b] cached positions of caches[b], up to
    steps[b] tokens each (cut after EOS), in one batch; with each token's NLL from the decode's own logits."""
    dev, eos = model.device, eos_id(model)
    width, n_steps = max(lengths), max(steps)
    cache = stack_prefixes(caches, lengths, n_steps)
    mask = torch.ones((len(first), width + n_steps), dtype=torch.long, device=dev)  # [B, W + T]
    for b, n in enumerate(lengths):
        mask[b, :width - n] = 0
    pos = torch.tensor(lengths, dtype=torch.long, device=dev)[:, None]  # [B, 1] position of each row's next token
    ids = torch.tensor(first, dtype=torch.long, device=dev)[:, None]  # [B, 1]
    rows = list(range(len(first)))  # batch row -> job
    conts, nlls = [[] for _ in first], [[] for _ in first]
    for t in range(n_steps):
        out = model(input_ids=ids, attention_mask=mask[:, :width + t + 1], past_key_values=cache, use_cache=True,
                    cache_position=torch.tensor([width + t], device=dev), position_ids=pos + t)
        logits = out.logits[:, -1].float()  # [b, V]
        y = logits.argmax(-1)  # [b]
        nll = -logits.log_softmax(-1).gather(1, y[:, None])[:, 0]  # [b]
        for r, b in enumerate(rows):
            if not _done(conts[b], steps[b], eos):
                conts[b].append(int(y[r]))
                nlls[b].append(float(nll[r]))
        running = [r for r, b in enumerate(rows) if not _done(conts[b], steps[b], eos)]
        if not running:
            break
        if len(running) <= SHED_FRACTION * len(rows):
            keep = torch.tensor(running, dtype=torch.long, device=dev)
            cache.batch_select_indices(keep)
            rows, mask, pos, y = [rows[r] for r in running], mask[keep], pos[keep], y[keep]
        ids = y[:, None]
    return conts, nlls


def _done(cont: list[int], steps: int, eos: int | None) -> bool:
    return len(cont) >= steps or (eos is not None and bool(cont) and cont[-1] == eos)


def episode_groups(jobs: list[Job], size: int) -> Iterator[list[int]]:
    """Indices of jobs, whole episodes at a time (in order of first appearance), in groups of at least ``size``
    jobs (the last may hold fewer)."""
    by_ep: dict[int, list[int]] = {}
    for k, job in enumerate(jobs):
        by_ep.setdefault(job.episode, []).append(k)
    group: list[int] = []
    for ks in by_ep.values():
        group += ks
        if len(group) >= size:
            yield group
            group = []
    if group:
        yield group


def forced_cached(model: PreTrainedModel, episodes: list[dict], jobs: list[Job], batch: int) -> list[Forced]:
    """Every job's forced continuation, from its episode's one pass; batches of up to ``batch`` rows of similar
    length from a group of episodes."""
    out: list[Forced | None] = [None] * len(jobs)
    bar = tqdm(total=len(jobs), desc="label (forced continuations, cached)")
    for group in episode_groups(jobs, GROUP_BATCHES * batch):
        queries: dict[int, list[tuple[int, int]]] = {}
        for k in group:
            queries.setdefault(jobs[k].episode, []).append((jobs[k].position, jobs[k].draft_id))
        passes = {e: episode_pass(model, episodes[e]["prompt_ids"], episodes[e]["output_ids"], q)
                  for e, q in queries.items()}
        order = sorted(group, key=lambda k: -jobs[k].steps)
        for start in range(0, len(order), batch):
            chunk = [jobs[k] for k in order[start:start + batch]]
            conts, nlls = cached_greedy(model, [passes[j.episode].cache for j in chunk],
                                        [len(episodes[j.episode]["prompt_ids"]) + j.position for j in chunk],
                                        [j.draft_id for j in chunk], [j.steps for j in chunk])
            for k, j, c, n in zip(order[start:start + batch], chunk, conts, nlls):
                p = passes[j.episode]
                out[k] = Forced(c, n, p.draft_nll[(j.position, j.draft_id)], p.own_nll)
            bar.update(len(chunk))
    bar.close()
    return out
