"""What the GPU check runs (pure): the shapes, prompt counts and timing grid of the full check and of ``--tiny``."""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

from scripts.gpucheck.scale_shapes import LLAMA_1B, LLAMA_8B, Shape

E2E_PROTOCOLS = ("greedy", "fh", "sh", "auto", "tree")  # testbed protocols run end to end


@dataclass(frozen=True)
class Plan:
    """Sizes of one check: the full one (Llama-3.1-8B / 3.2-1B shapes) or the tiny one (same code, toy shapes)."""

    name: str  # full | tiny
    target: Shape  # verifier shape (lossless, timing grid, edge)
    drafter: Shape  # the UEs' drafter shape (testbed, draft timing)
    prompts: int = 8  # lossless prompts
    prompt_len: int = 32  # tokens per random prompt
    new_tokens: int = 64  # tokens generated per lossless prompt
    draft_len: int = 8  # chain K (lossless and testbed)
    tree_budget: int = 16  # tree tokens per round (lossless and testbed)
    ks: tuple[int, ...] = (1, 4, 8, 16, 32, 64)  # timing grid: draft lengths K
    batches: tuple[int, ...] = (1, 4, 16, 32)  # timing grid: requests per pass
    prefixes: tuple[int, ...] = (128, 1024)  # timing grid: cached prefix per request, tokens
    server_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32)  # server-only stage: sessions per decode step
    warmup: int = 2  # untimed passes per grid point
    repeats: int = 5  # timed passes per grid point (the median is kept)
    e2e_prompts: int = 2  # testbed prompts per protocol
    e2e_new_tokens: int = 16  # testbed tokens per prompt
    draft_tokens: int = 32  # draft timing: tokens drafted per timed run
    memory_budget_mb: int = 16384  # the edge's and the grid's KV budget (batch 32 x prefix 1024 needs ~4.6 GB)
    noise_sigmas: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)  # drafter head noise candidates
    agreement: float = 0.75  # wanted drafter/target top-1 agreement when picking the noise
    drafter_logit_std: float = 8.0  # the drafter's logits scaled to this spread: best-first trees follow its chain


TINY_TARGET = replace(LLAMA_8B, name="tiny-8B-shape", vocab=512, hidden=64, layers=2, heads=4, kv_heads=2,
                      intermediate=128, bos=1, eos=2)
TINY_DRAFTER = replace(LLAMA_1B, name="tiny-1B-shape", vocab=512, hidden=32, layers=2, heads=4, kv_heads=2,
                       intermediate=64, bos=1, eos=2)
FULL = Plan("full", LLAMA_8B, LLAMA_1B)
TINY = Plan("tiny", TINY_TARGET, TINY_DRAFTER, prompts=3, new_tokens=24, ks=(1, 4, 8, 16), batches=(1, 2, 4),
            prefixes=(16, 64), server_batches=(1, 2, 4), warmup=1, repeats=3, e2e_prompts=1, e2e_new_tokens=12,
            draft_tokens=8,
            memory_budget_mb=256)


def plan_for(tiny: bool) -> Plan:
    return TINY if tiny else FULL


def prompt_ids(n: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    """``n`` prompts of ``length`` random token ids, clear of the low (special) ids."""
    rng, low = random.Random(seed), min(1000, vocab // 4)
    return [[rng.randrange(low, vocab) for _ in range(length)] for _ in range(n)]


def server_points(plan: Plan) -> list[tuple[int, int, int]]:
    """(batch, prefix, K) of the server-only stage: a decode step alone (K = 0, one row a session) and a verification
    pass of the check's K (K + 1 rows a session), at each batch and prefix."""
    return [(b, p, k) for p in plan.prefixes for b in plan.server_batches for k in (0, plan.draft_len)]


def grid_points(plan: Plan) -> list[tuple[int, int, int]]:
    """(batch, prefix, K) of every timing point, grouped so that one prefill serves every K."""
    return [(b, p, k) for p in plan.prefixes for b in plan.batches for k in plan.ks]
