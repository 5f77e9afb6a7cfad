"""evaluate's reuse of greedy SD's output on prompts without a mismatch: the same tokens and rounds as a fresh run."""
import copy
from types import SimpleNamespace

import torch

from labeling.config import EvalConfig
from labeling.evaluate import mismatch_free, run_loop
from tests.tiny_pair import make_pair
from wisv.decoding.speculative import AcceptAll, RejectAll

NOISE = 0.01


def test_reused_rows_match_a_fresh_wisv_run():
    _, target = make_pair(seed=3)
    drafter = copy.deepcopy(target)
    with torch.no_grad():  # a close copy: some prompts are drafted without a mismatch, some are not
        for p in drafter.parameters():
            p.add_(torch.randn_like(p) * NOISE)
    pair = SimpleNamespace(drafter=drafter, target=target)
    rows = [{"prompt_ids": [1 + i, 7, 3 + 2 * i]} for i in range(12)]
    cfg = EvalConfig(draft_len=4, max_new_tokens=6)
    base = run_loop(pair, rows, cfg, RejectAll(), 0.0, None, "greedy")
    free = [mismatch_free(o) for o in base]
    assert any(free) and not all(free)  # both kinds of row occur
    fresh = run_loop(pair, rows, cfg, AcceptAll(), 0.5, None, "fresh")
    reused = run_loop(pair, rows, cfg, AcceptAll(), 0.5, None, "reused", base)
    assert [o.tokens for o in reused] == [o.tokens for o in fresh]
    assert [len(o.rounds) for o in reused] == [len(o.rounds) for o in fresh]
    assert all((r is b) == f for r, b, f in zip(reused, base, free))  # only the mismatch-free rows are reused
    assert any(f.tokens != b.tokens for f, b in zip(fresh, base))  # accepting mismatches changes the others
