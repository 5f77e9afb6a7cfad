"""SpecEdge's UE-side rules as pure functions: proactive-draft reuse and pipeline-aware draft depth (SPEC SpecEdge).

Proactive drafting: while block ``y_1..y_K`` is being verified, the UE keeps drafting ``p_1..p_m`` as if the
whole block will be accepted (``p_1`` is its guess for the bonus position).  When the verdict accepts all
K tokens and the bonus token equals ``p_1``, the committed sequence already continues with ``p_1`` and
``p_2..p_m`` are valid drafts of the next block: they are reused.  Otherwise every proactive token is dropped.

Pipeline-aware depth: pick K so that drafting K tokens plus the round trip matches the verification time
the edge reports, ``K * tau_d + RTT ~= T_verify``, clamped to [k_min, k_max].
"""
from __future__ import annotations

from wisv.timing.kpolicy import pipeline_depth  # noqa: F401 - its home is wisv/timing/kpolicy.py, with the other K rules


def proactive_reuse(block_len: int, n_accepted: int, next_token: int, proactive: list[int]) -> list[int]:
    """The proactive tokens that start the next draft block (empty unless full acceptance and bonus == p_1)."""
    if not 0 <= n_accepted <= block_len:
        raise ValueError(f"need 0 <= n_accepted <= block_len, got {n_accepted}, {block_len}")
    if n_accepted < block_len or not proactive or proactive[0] != next_token:
        return []
    return list(proactive[1:])


