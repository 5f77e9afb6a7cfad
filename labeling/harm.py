"""What a label means: does forcing the drafter's token harm the output?  (Pure functions.)

For one mismatch, the label stage forces the draft token onto the target's greedy path and lets the target finish.
Two things can go wrong, and one can go right:

* **turns wrong**: the target's own output answers right and the forced output answers wrong;
* **disfluent**: the target finds the forced text far less likely than its own.  Over a window of ``window``
  tokens from the mismatch on (the forced token and its continuation, against the target's own tokens there),
  the perplexity ratio ``exp(mean NLL(forced) - mean NLL(own))`` exceeds ``max_ppl_ratio``.  This catches what an
  answer checker cannot see: a word fragment ("passivequate") after the answer;
* **turns right**: the target's own output answers wrong and the forced one right ("helpful").

``harmful = turns wrong or disfluent``: the label the head learns (``y = 1``: reject the draft token).
``helpful = turns right and not disfluent``: counted separately and never harmful.  ``changed`` is the
earlier either-direction label (the outcome differs), kept for comparison.
"""
from __future__ import annotations

from collections.abc import Sequence

from wisv.tasks.textquality import perplexity_ratio


def window_ppl_ratio(nll_forced: Sequence[float], nll_own: Sequence[float], window: int) -> float:
    """The perplexity ratio of the forced tokens over the target's own, over the first ``window`` tokens of each."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    return perplexity_ratio(nll_forced[:window], nll_own[:window])


def harm_label(target_ok: bool, forced_ok: bool, ppl_ratio: float, max_ppl_ratio: float) -> dict[str, int]:
    """turns_wrong, turns_right, disfluent, harmful, helpful and changed (0/1) of one forced mismatch.  A nan
    ratio (no tokens to compare) is not disfluent."""
    if max_ppl_ratio <= 1:
        raise ValueError(f"max_ppl_ratio must be > 1, got {max_ppl_ratio}")
    wrong, right = target_ok and not forced_ok, forced_ok and not target_ok
    disfluent = ppl_ratio > max_ppl_ratio  # False for nan
    return {"turns_wrong": int(wrong), "turns_right": int(right), "disfluent": int(disfluent),
            "harmful": int(wrong or disfluent), "helpful": int(right and not disfluent),
            "changed": int(wrong or right)}
