"""Resolve the edge's mismatch policy from the ``--head`` flag."""
from __future__ import annotations

from wisv.speculative import AcceptAll, MismatchPolicy, RejectAll

HEADS: dict[str, type] = {
    "none": RejectAll,  # greedy-equivalent: every mismatch is rejected
    "accept-all": AcceptAll,  # the accept-everything limit (commits every full draft)
}
HEAD_CHOICES = sorted(HEADS)


def load_policy(head: str) -> MismatchPolicy:
    """The policy named by ``head``; trained decision heads plug in here."""
    try:
        return HEADS[head]()
    except KeyError:
        raise ValueError(f"unknown head {head!r}; choose one of {HEAD_CHOICES}") from None
