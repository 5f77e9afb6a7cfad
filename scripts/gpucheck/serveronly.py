"""Server-only against speculation on the edge's compute (pure): from the server stage's timings, a decode step
alone (one row a session: what the edge pays per token when it generates alone) against a verification pass of
K + 1 rows a session, per batch.

A speculative round costs the edge one pass of K + 1 rows and commits ``AAL + 1`` tokens a session; server-only
commits one token a session per decode step.  So speculation gives the edge more tokens per second of compute when
``AAL + 1 > T_verify(K) / T_decode``: the break-even AAL is ``T_verify / T_decode - 1`` (SpecEdge's server
throughput argument: on a GPU a pass of K + 1 rows costs about one row, so the break-even AAL is near 0)."""
from __future__ import annotations

import pandas as pd


def server_table(rows: list[dict], draft_len: int) -> list[dict]:
    """Per (batch, prefix): decode ms, verify ms at ``draft_len``, their ratio, the break-even AAL, and the server
    throughput (tokens a second of edge compute) of server-only; ``rows``: time_grid's rows at K = 0 and K."""
    df = pd.DataFrame(rows)
    if df.empty:
        return []
    t = df.pivot_table(index=["batch", "prefix"], columns="k", values="seconds", aggfunc="median")
    if 0 not in t.columns or draft_len not in t.columns:
        raise ValueError(f"server rows need K = 0 and K = {draft_len}; got K {sorted(t.columns)}")
    out = []
    for (batch, prefix), r in t.iterrows():
        decode_s, verify_s = float(r[0]), float(r[draft_len])
        out.append({"batch": int(batch), "prefix": int(prefix), "k": draft_len, "decode_ms": 1e3 * decode_s,
                    "verify_ms": 1e3 * verify_s, "verify_over_decode": verify_s / decode_s,
                    "break_even_aal": verify_s / decode_s - 1.0,
                    "server_only_tok_per_s": batch / decode_s})
    return out


def sd_throughput(row: dict, aal: float) -> float:
    """Speculation's server throughput at this point for a drafter of ``aal``: tokens a second of edge compute."""
    return row["batch"] * (aal + 1.0) / (row["verify_ms"] / 1e3)
