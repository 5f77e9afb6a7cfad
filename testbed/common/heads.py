"""Resolve the edge's mismatch policy and threshold from ``--head`` and ``--tau``.

``--head`` is ``default`` (the head shipped for the named pair whose target is used: for ``--pair smollm2`` the
edge judge wisv/assets/smollm2-judges/edge, which reads only what the edge computes and is served by ``ef``; for the
built-in pair its paper head wisv/assets/toy-pair/head; for another target the greedy-equivalent policy, with a
notice), ``wisv-paper`` (the paper's CSI-aware head over [h_d ; h_t ; csi], served by fh/sh), a peer judge's name
shipped for the pair (``autojudge``, ``judge-decoding``, ``fly``, ``nll-margin``), ``none`` (reject every
mismatch: greedy-equivalent), ``accept-all`` (commit every full draft), a plugin's policy kind that needs no
weights (wisv.head.store.named_policy), or the path of a head directory (a paper head
from ``python -m labeling export`` or a judge from ``python -m labeling judges``).  ``--tau`` overrides the head's
own operating threshold.
"""
from __future__ import annotations

from pathlib import Path

from wisv.head.policy import FIXED_TAU, AcceptAll, MismatchPolicy, RejectAll
from wisv.head.store import PLUGIN_KINDS, is_policy_dir, load_policy_dir, named_policy
from wisv.pairs import pair_default_head, pair_heads, pair_of_target

FIXED: dict[str, type] = {
    "none": RejectAll,  # greedy-equivalent: every mismatch is rejected
    "accept-all": AcceptAll,  # the accept-everything limit (commits every full draft)
}
HEAD_HELP = ("decision head for ef/fh/sh/auto: default | wisv-paper | a peer judge shipped for the pair (autojudge, "
             "judge-decoding, fly, nll-margin) | none (greedy-equivalent) | accept-all | "
             + "".join(f"{k} (plugin) | " for k in PLUGIN_KINDS) + "PATH (a head or judge dir)")
FALLBACK_TAU = FIXED_TAU  # threshold for the fixed policies (they ignore it except at tau = 0)


def default_head_dir(target: str | Path | None = None) -> Path | None:
    """The trained head shipped for the named pair whose target dir is ``target`` (None: the built-in pair's);
    None for a target that belongs to no named pair."""
    name = pair_of_target(target)
    return None if name is None else pair_default_head(name)


def load_policy(head: str, tau: float | None = None, target: str | None = None,
                target_hidden: int | None = None) -> tuple[MismatchPolicy, float, str]:
    """(policy, tau, description).  ``target`` is the target dir (None: built-in); a head trained for other
    hidden sizes than ``target_hidden`` raises ValueError."""
    if head == "default":
        path = default_head_dir(target)
        if path is None or not is_policy_dir(path):
            why = "no named pair has this target" if path is None else f"no head at {path}"
            return RejectAll(), FALLBACK_TAU if tau is None else tau, \
                f"none (no default head: {why}; pass --head PATH for this target)"
        head = str(path)
    name = pair_of_target(target)
    if name is not None and head in pair_heads(name):
        head = str(pair_heads(name)[head])
    if head in FIXED:
        return FIXED[head](), FALLBACK_TAU if tau is None else tau, head
    plugin = named_policy(head)
    if plugin is not None:
        tau = plugin.tau if tau is None else tau
        return plugin, tau, f"{head} (plugin, tau={tau})"
    if not Path(head).exists():
        raise ValueError(f"unknown head {head!r}: not one of default, {', '.join((*FIXED, *PLUGIN_KINDS))} and not "
                         f"a directory")
    policy, tau = load_policy_dir(head, tau, d_target=target_hidden)
    return policy, tau, f"{head} (tau={tau})"
