"""Draft cost on this device: the UE drafter shape's ms per drafted token (the drafting loop the UE runs)."""
from __future__ import annotations

import numpy as np
from transformers import PreTrainedModel

from scripts.gpucheck.grid import timer
from wisv.decoding.sessions import DraftSession


def draft_ms_per_token(drafter: PreTrainedModel, prompt: list[int], tokens: int, repeats: int, device: str) -> dict:
    """Median ms per token of drafting ``tokens`` greedily after ``prompt``: each run feeds the prompt's last token,
    then its own drafts, one forward per token (the rest of the prompt prefilled, untimed)."""
    sess, clock = DraftSession(drafter, prompt), timer(device)
    sess.draft(1)  # prefill the prompt
    base = len(prompt) - 1
    sess.rollback(base)
    times = []
    for i in range(repeats + 1):  # the first run warms up
        secs = clock(lambda: sess.draft(tokens))
        sess.rollback(base)
        if i:
            times.append(secs)
    return {"tokens_per_run": tokens, "runs": repeats, "ms_per_token": 1e3 * float(np.median(times)) / tokens,
            "ms_per_token_runs": [round(1e3 * t / tokens, 4) for t in times]}
