"""CSI traces: time-stamped CSI rows stored as CSV and looked up piecewise-constant in time.

CSV columns: ``t_s, rate_up_mbps, rate_down_mbps, rtt_ms`` and either ``per`` (both directions) or
``per_up`` and ``per_down``; other columns are ignored.  Row ``i`` is in force from ``t_s[i]`` until
``t_s[i + 1]``; before the first row the first row applies.  A looping trace repeats with period
``period_s = t_s[-1] + (t_s[-1] - t_s[-2])``: the last row is held as long as the row before it.
An optional ``outage`` column (0 or 1) marks rows during which nothing passes the link (channel/outage.py):
row ``i`` with ``outage = 1`` is an outage from ``t_s[i]`` until ``t_s[i + 1]`` (its CSI columns still need
values: the CSI recorded as in force); the last row cannot be one, since it would never end.
"""
from __future__ import annotations

import bisect
import csv
import math
from dataclasses import dataclass, replace
from pathlib import Path

from channel.csi import CSI
from channel.outage import Outages, Span

BASE_COLUMNS = ("t_s", "rate_up_mbps", "rate_down_mbps", "rtt_ms")
OUTAGE_COLUMN = "outage"  # optional: 1 = nothing passes the link during this row


@dataclass(frozen=True)
class CSITrace:
    """A sequence of CSI rows with start times."""

    t_s: tuple[float, ...]  # row start times, s from the trace start; finite, >= 0, strictly increasing
    csis: tuple[CSI, ...]  # csis[i] is in force from t_s[i] until t_s[i + 1]
    loop: bool = False  # repeat the trace every period_s
    outage_spans: tuple[Span, ...] = ()  # (start_s, end_s) periods when nothing passes (channel/outage.py)

    def __post_init__(self) -> None:
        object.__setattr__(self, "outage_spans", tuple((float(a), float(b)) for a, b in self.outage_spans))
        object.__setattr__(self, "t_s", tuple(float(t) for t in self.t_s))
        object.__setattr__(self, "csis", tuple(self.csis))
        if not self.t_s or len(self.t_s) != len(self.csis):
            raise ValueError(
                f"CSITrace needs >= 1 row and equal lengths, got {len(self.t_s)} times, {len(self.csis)} CSIs")
        if not all(math.isfinite(t) and t >= 0 for t in self.t_s):
            raise ValueError(f"CSITrace.t_s must be finite and >= 0, got {self.t_s}")
        for i in range(1, len(self.t_s)):
            if self.t_s[i] <= self.t_s[i - 1]:
                raise ValueError(
                    f"CSITrace.t_s must be strictly increasing: row {i} t_s={self.t_s[i]} <= {self.t_s[i - 1]}")
        _ = self.outages  # validates the spans

    @property
    def outages(self) -> Outages:
        """The outage periods (repeating with the trace when it loops)."""
        return Outages.make(self.outage_spans, self.period_s if self.loop else math.inf)

    def with_outages(self, spans: list[Span]) -> CSITrace:
        """This trace with more outage periods."""
        return replace(self, outage_spans=self.outage_spans + tuple(spans)) if spans else self

    @classmethod
    def constant(cls, csi: CSI) -> CSITrace:
        return cls((0.0,), (csi,))

    def __len__(self) -> int:
        return len(self.t_s)

    @property
    def period_s(self) -> float:
        """Loop period, s; inf for a one-row trace (it never changes)."""
        if len(self.t_s) == 1:
            return math.inf
        return self.t_s[-1] + (self.t_s[-1] - self.t_s[-2])

    def at(self, t_s: float) -> CSI:
        """CSI in force at t_s seconds from the trace start."""
        if self.loop and math.isfinite(self.period_s):
            t_s = t_s % self.period_s
        i = bisect.bisect_right(self.t_s, t_s) - 1
        return self.csis[max(i, 0)]


def load_trace(path: str | Path, loop: bool = False) -> CSITrace:
    """Read a CSV trace; errors name the file, the line and the column."""
    path = Path(path)
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        per_columns = _check_header(path, reader.fieldnames)
        has_outage = OUTAGE_COLUMN in (reader.fieldnames or ())
        times: list[float] = []
        csis: list[CSI] = []
        down: list[bool] = []
        for row in reader:
            where = f"{path}: line {reader.line_num}"
            t = _number(row, "t_s", where)
            if not (math.isfinite(t) and t >= 0):
                raise ValueError(f"{where}: column 't_s': must be finite and >= 0, got {t}")
            if times and t <= times[-1]:
                raise ValueError(f"{where}: column 't_s': not increasing ({t} after {times[-1]})")
            times.append(t)
            csis.append(_row_csi(row, per_columns, where))
            down.append(has_outage and _flag(row, OUTAGE_COLUMN, where))
    if not times:
        raise ValueError(f"{path}: trace has no rows")
    if down[-1]:
        raise ValueError(f"{path}: the last row is an outage, which would never end: add a row where the link returns")
    spans = tuple((times[i], times[i + 1]) for i in range(len(times) - 1) if down[i])
    return CSITrace(tuple(times), tuple(csis), loop, spans)


def save_trace(trace: CSITrace, path: str | Path) -> None:
    """Write a CSV trace; uses the single ``per`` column when every row is symmetric, and an ``outage`` column when
    the trace has outages (which must then start and end at row times)."""
    symmetric = all(c.per_up == c.per_down for c in trace.csis)
    per_columns = ("per",) if symmetric else ("per_up", "per_down")
    down = _outage_rows(trace)
    with Path(path).open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(BASE_COLUMNS + per_columns + ((OUTAGE_COLUMN,) if any(down) else ()))
        for t, c, d in zip(trace.t_s, trace.csis, down):
            pers = (c.per_up,) if symmetric else (c.per_up, c.per_down)
            flag = (int(d),) if any(down) else ()
            writer.writerow([repr(x) for x in (t, c.rate_up_mbps, c.rate_down_mbps, c.rtt_ms, *pers)] + list(flag))


def _outage_rows(trace: CSITrace) -> list[bool]:
    """Per row, whether it is an outage; ValueError when an outage does not start and end at row times."""
    ends = trace.t_s[1:] + (math.inf,)
    down = [any(a <= t and e <= b for a, b in trace.outages.spans) for t, e in zip(trace.t_s, ends)]
    rebuilt = Outages.make([(t, e) for t, e, d in zip(trace.t_s, ends, down) if d])
    if rebuilt.spans != trace.outages.spans:
        raise ValueError(f"save_trace: outages {trace.outage_spans} do not start and end at the trace's row times")
    return down


def _check_header(path: Path, header: list[str] | None) -> tuple[str, ...]:
    """Validate the header; return the PER columns in use: ('per',) or ('per_up', 'per_down')."""
    if not header:
        raise ValueError(f"{path}: empty file, expected a header with columns {BASE_COLUMNS} and per")
    cols = set(header)
    missing = [c for c in BASE_COLUMNS if c not in cols]
    split = [c for c in ("per_up", "per_down") if c in cols]
    if "per" in cols and split:
        raise ValueError(f"{path}: give either column 'per' or columns 'per_up'/'per_down', not both")
    if "per" not in cols:
        missing += [c for c in ("per_up", "per_down") if c not in cols] if split else ["per"]
    if missing:
        raise ValueError(f"{path}: missing columns {missing} (header: {header})")
    return ("per",) if "per" in cols else ("per_up", "per_down")


def _number(row: dict[str, str | None], col: str, where: str) -> float:
    text = (row.get(col) or "").strip()
    if not text:
        raise ValueError(f"{where}: column '{col}': missing value")
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{where}: column '{col}': not a number: {text!r}") from None


def _flag(row: dict[str, str | None], col: str, where: str) -> bool:
    """A 0/1 column (empty: 0)."""
    text = (row.get(col) or "").strip()
    if text not in ("", "0", "1"):
        raise ValueError(f"{where}: column '{col}': expected 0 or 1, got {text!r}")
    return text == "1"


def _row_csi(row: dict[str, str | None], per_columns: tuple[str, ...], where: str) -> CSI:
    vals = {c: _number(row, c, where) for c in BASE_COLUMNS[1:] + per_columns}
    per_up = vals.get("per", vals.get("per_up"))
    per_down = vals.get("per", vals.get("per_down"))
    try:
        return CSI(vals["rate_up_mbps"], vals["rate_down_mbps"], vals["rtt_ms"], per_up, per_down)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


