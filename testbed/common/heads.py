"""Resolve the edge's mismatch policy and threshold from ``--head`` and ``--tau``.

``--head`` is ``default`` (the built-in pair's trained head, wisv/assets/toy-pair/head; for another
target the greedy-equivalent policy, with a notice), ``none`` (reject every mismatch: greedy-equivalent),
``accept-all`` (commit every full draft), or the path of a head directory written by
``python -m labeling train``.  ``--tau`` overrides the head's own operating threshold.
"""
from __future__ import annotations

from pathlib import Path

from wisv.head import load_policy_from
from wisv.models import builtin_paths
from wisv.speculative import AcceptAll, MismatchPolicy, RejectAll

FIXED: dict[str, type] = {
    "none": RejectAll,  # greedy-equivalent: every mismatch is rejected
    "accept-all": AcceptAll,  # the accept-everything limit (commits every full draft)
}
HEAD_HELP = "decision head for fh/sh/auto: default | none (greedy-equivalent) | accept-all | PATH (a trained head dir)"
FALLBACK_TAU = 0.5  # threshold for the fixed policies (they ignore it except at tau = 0)


def default_head_dir() -> Path:
    """The trained head shipped with the built-in pair."""
    return builtin_paths()[1].parent / "head"


def load_policy(head: str, tau: float | None = None, target: str | None = None,
                target_hidden: int | None = None) -> tuple[MismatchPolicy, float, str]:
    """(policy, tau, description).  ``target`` is the target dir (None: built-in); a head trained for other
    hidden sizes than ``target_hidden`` raises ValueError."""
    if head == "default":
        if target is not None and Path(target).resolve() != builtin_paths()[1].resolve():
            return RejectAll(), FALLBACK_TAU if tau is None else tau, \
                "none (the default head belongs to the built-in pair; pass --head PATH for this target)"
        head = str(default_head_dir())
    if head in FIXED:
        return FIXED[head](), FALLBACK_TAU if tau is None else tau, head
    if not Path(head).exists():
        raise ValueError(f"unknown head {head!r}: not one of default, {', '.join(FIXED)} and not a directory")
    policy, tau = load_policy_from(head, tau, d_target=target_hidden)
    return policy, tau, f"{head} (tau={tau})"
