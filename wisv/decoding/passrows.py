"""The shape of a verification pass: how many rows to feed the target, from what each row count costs.

On one CPU thread a pass of n rows is not priced in proportion to n: the target's matrix products run in kernels chosen
by the row count, and on the machine of issue 43 a pass of 3 rows cost more than one of 4 (the SmolLM2 target: about
57, 98, 119 and 83 ms for 1 to 4 rows; ``scripts/bench/pass_rows.py`` measures it).  Padding a block's pass with
filler rows, whose outputs are dropped and whose cache slots are cropped, then buys a cheaper pass.  The filler sits
after the block under the causal mask, so the block's rows read nothing of it.  A plan maps a row count to the count
to feed; it is data (a benchmark's JSON), so a run that reads the same plan feeds the same passes.  Pure functions,
but ``load_plan``, which reads that JSON.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

MAX_PLAN_ROWS = 1024  # the most rows a plan may feed a pass (a plan read from a file is bounded by it)


def pad_count(rows: int, plan: Mapping[int, int] | None) -> int:
    """Filler rows to add to a pass of ``rows`` rows under ``plan`` (rows -> rows to feed; None or absent: none)."""
    if rows < 1:
        raise ValueError(f"a pass has at least one row, not {rows}")
    return max(0, (plan or {}).get(rows, rows) - rows)


def cheapest_rows(ms_by_rows: Mapping[int, float], rows: int, margin: float = 0.05) -> int:
    """The row count m >= ``rows`` whose measured pass is cheapest (``ms_by_rows``: milliseconds per pass, by rows), if
    it costs at least ``margin`` (a fraction) less than ``rows``' own pass; else ``rows``, as for a count not measured.
    Ties go to the fewer rows."""
    if rows < 1 or not 0.0 <= margin < 1.0:
        raise ValueError(f"rows >= 1 and 0 <= margin < 1, not {rows} and {margin}")
    if rows not in ms_by_rows:
        return rows
    m = min((m for m in ms_by_rows if m >= rows), key=lambda m: (ms_by_rows[m], m))
    return m if ms_by_rows[m] < (1.0 - margin) * ms_by_rows[rows] else rows


def pad_plan(ms_by_rows: Mapping[int, float], margin: float = 0.05) -> dict[int, int]:
    """The plan from measured costs: each row count whose cheapest count (``cheapest_rows``) is larger, to that
    count."""
    plan = {n: cheapest_rows(ms_by_rows, n, margin) for n in sorted(ms_by_rows)}
    return {n: m for n, m in plan.items() if m != n}


def read_plan(doc: Mapping) -> dict[int, int]:
    """The plan of a ``scripts/bench/pass_rows.py`` JSON (``target_pad_plan``; JSON keys are strings), checked: every
    entry pads a count to a larger one, of at most MAX_PLAN_ROWS rows."""
    try:
        plan = {int(n): int(m) for n, m in doc["target_pad_plan"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"not a pass-rows benchmark (no valid target_pad_plan): {e}") from None
    bad = {n: m for n, m in plan.items() if not 1 <= n < m <= MAX_PLAN_ROWS}
    if bad:
        raise ValueError(f"target_pad_plan must pad each count to a larger one, at most {MAX_PLAN_ROWS}, not {bad}")
    return plan


def load_plan(path: str) -> dict[int, int]:
    """The plan of the ``scripts/bench/pass_rows.py`` JSON at ``path`` (the one reader that touches a file here); a
    missing or unreadable file, or one without a valid plan, is a ValueError naming it."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"pass-rows benchmark {path}: {e}") from None
    try:
        return read_plan(doc)
    except ValueError as e:
        raise ValueError(f"pass-rows benchmark {path}: {e}") from None
