"""Re-time a live run's prompts under another link: the measured compute kept, the link's part swapped.

A live prompt's end-to-end time is its compute (drafting, verification, the edge's decode passes, the head), its
link time and host overhead.  Its records say what crossed the link: each round's bytes up and down and its
request/reply exchanges (``RoundRow``).  Under another link the same rounds take the same compute and overhead and
a different link time, so

    retimed = measured - link(recorded CSI) + link(new CSI)

where ``link`` of a prompt is its OPEN (one RTT, the prompt's ids up) plus, per round, its bytes serialized at the
rates in force and one RTT per exchange.  The new CSI is looked up at each round's start on the new time line (the
measured offset of the round plus what the earlier rounds gained or lost), so a trace's slow spans land where the
re-timed prompt would meet them.  Server-only's chunks after the first carry no exchange (they come unasked): only
their serialization is counted, as if none overlapped decoding, an upper bound.

What it keeps is also what it cannot change: the rounds' decisions (K, the protocol `auto` chose, a hand-over) are
the ones made on the recorded link.  A protocol whose choices follow the link would choose otherwise on the new one;
re-timed rows say "simulated, decisions as recorded".  Pure: rows are mappings of ``RoundRow`` fields.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from channel.csi import CSI

OPEN_BYTES_PER_TOKEN = 4  # the OPEN's prompt ids on the wire, bytes per token (int32)


def _num(row: Mapping, key: str) -> float:
    """A record's numeric field, 0 where missing or NaN."""
    v = row.get(key)
    return 0.0 if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def round_link_s(row: Mapping, csi: CSI) -> float:
    """One round's link time under ``csi``: its bytes each way serialized plus one RTT per exchange, s."""
    up, down = int(_num(row, "uplink_bytes")), int(_num(row, "downlink_bytes"))
    return csi.uplink_s(up) + csi.downlink_s(down) + _num(row, "exchanges") * csi.rtt_ms / 1e3


def open_link_s(prompt_len: int, csi: CSI) -> float:
    """The OPEN's link time: the prompt's ids up and one RTT, s."""
    return csi.uplink_s(prompt_len * OPEN_BYTES_PER_TOKEN) + csi.rtt_ms / 1e3


def retime_prompt(measured_s: float, rows: Sequence[Mapping], prompt_len: int, recorded: Callable[[Mapping], CSI],
                  new_at: Callable[[float], CSI], t0_s: float = 0.0) -> float:
    """A prompt's end-to-end time under the link ``new_at`` (the CSI at a time on its clock, s; the prompt starts
    at ``t0_s``), from its ``measured_s`` and its rounds in order, each recorded under ``recorded(row)``; never
    below the measured time less its whole recorded link time (its compute and overhead)."""
    if measured_s < 0 or prompt_len < 0:
        raise ValueError(f"need a measured time and a prompt length >= 0, got {measured_s}, {prompt_len}")
    first = recorded(rows[0]) if rows else new_at(t0_s)
    old = open_link_s(prompt_len, first)
    shift = open_link_s(prompt_len, new_at(t0_s)) - old
    start = 0.0  # the round's start on the recorded clock, s since the OPEN
    for row in rows:
        was = round_link_s(row, recorded(row))
        old += was
        shift += round_link_s(row, new_at(t0_s + start + shift)) - was
        start = _num(row, "t_arrival_s") or start
    return max(measured_s + shift, measured_s - old)


def retime_run(prompts: Sequence[tuple[float, Sequence[Mapping], int]], recorded: Callable[[Mapping], CSI],
               new_at: Callable[[float], CSI]) -> list[float]:
    """Each prompt of a run (measured time, its rounds, its prompt length), re-timed in order end to end on the new
    link's clock (a prompt starts where the previous re-timed one ended), s."""
    out, t = [], 0.0
    for measured, rows, prompt_len in prompts:
        out.append(retime_prompt(measured, rows, prompt_len, recorded, new_at, t))
        t += out[-1]
    return out
