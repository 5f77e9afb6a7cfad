"""The per-round record every producer writes (the UE, the load generator, the simulator's traces), as rows of CSV.

One ``RoundRow`` per speculative-decoding round.  A producer fills what it measures and leaves the rest None
(NaN in a DataFrame): the simulator knows no bytes or times, the load generator uploads no hidden states, the UE
runs no SLO budget.  Summaries, tables and plots are computed from these rows (``wisv.records.summary``).  Files written
before the names were unified are read through ``read_records``, the one place that knows the old names.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import pandas as pd


@dataclass(kw_only=True)
class RoundRow:
    """One draft/verify round of one prompt; None where the producer cannot know the value."""

    prompt_id: str  # prompt the round belongs to
    ue_id: str | None = None  # UE (or emulated device) that drafted it
    round: int  # round index within the prompt, from 0
    protocol: str | None = None  # protocol the round used: greedy | reject | fh | sh (auto resolves per round)
    drafted: int  # draft tokens sent this round (K, smaller near the budget)
    window_k: int | None = None  # K the draft-window policy chose before drafting (--draft-len auto); None: fixed K
    accepted: int  # draft tokens committed (the correction/bonus token not counted)
    mismatches: int | None = None  # greedy-mismatch positions in the block (head candidates)
    queried: int | None = None  # positions whose drafter hidden states the edge requested (SH)
    exchanges: int | None = None  # request/reply exchanges on the link this round
    uplink_bytes: int | None = None  # bytes sent UE -> edge this round, on the wire
    downlink_bytes: int | None = None  # bytes sent edge -> UE this round, on the wire
    feature_bytes: int | None = None  # of downlink_bytes: the VERDICT's target features (n x d_t fp16 payload), bytes
    t_draft_s: float | None = None  # drafting time of the block, s
    t_comm_s: float | None = None  # link time: the round's socket-to-socket time minus the edge's time, s
    t_verify_s: float | None = None  # target verification pass, s
    t_head_s: float | None = None  # decision head at the edge, s
    t_round_s: float | None = None  # whole round on the UE's clock (load tests: DRAFT sent to VERDICT), s
    wdt_tokens: int | None = None  # wasted drafted tokens, drafted - accepted (WISP WDT)
    proactive_drafted: int | None = None  # tokens drafted past the block while it was verified (SpecEdge)
    proactive_reused: int | None = None  # proactive tokens that opened the next block
    t_proactive_s: float | None = None  # time spent drafting proactively, s
    t_wdt_s: float | None = None  # wasted drafting time, wdt_tokens * tau_d, s
    rtt_ms: float | None = None  # CSI in force on the emulated link: round-trip time, ms
    rate_up_mbps: float | None = None  # CSI in force: uplink rate, Mbit/s (None: unlimited)
    rate_down_mbps: float | None = None  # CSI in force: downlink rate, Mbit/s (None: unlimited)
    per: float | None = None  # CSI in force: uplink packet error rate
    per_down: float | None = None  # CSI in force: downlink packet error rate
    est_rtt_ms: float | None = None  # the UE's estimate of the RTT before the round, ms
    est_rate_up_mbps: float | None = None  # the UE's estimate of the uplink rate, Mbit/s
    est_rate_down_mbps: float | None = None  # the UE's estimate of the downlink rate, Mbit/s
    committed: int | None = None  # tokens appended to the output (accepted + 1, cut at EOS or the budget)
    prefix_len: int | None = None  # committed length L at the round's start, prompt included (tokens)
    prompt_len: int | None = None  # the prompt's length (tokens)
    n_tokens: int | None = None  # tokens the whole prompt generated (the same on each of its rounds)
    correct: bool | None = None  # the prompt's answer is right (the same on each of its rounds)
    t_sent_s: float | None = None  # load tests: DRAFT sent, s since the load run started
    t_edge_s: float | None = None  # time the edge reported for the request (queue + verify + head), s
    t_queue_s: float | None = None  # load tests: waiting at the edge before verification, s
    slo_tok_s: float | None = None  # load tests: the device's SLO class, token/s
    budget_s: float | None = None  # load tests: verification budget tau_c (WISP eq. 6), s
    violated: bool | None = None  # load tests: the edge's time exceeded the budget
    batch: int | None = None  # requests verified in the same pass
    tree_size: int | None = None  # tree protocol: nodes in the draft tree sent (= drafted)
    tree_depth: int | None = None  # tree protocol: the draft tree's depth (its longest root path, tokens)
    accepted_depth: int | None = None  # tree protocol: depth of the accepted path (= accepted)
    draft_conf_survival: float | None = None  # block's sum_j prod_{i<=j} max prob (wisv/serving/wdt.py), tokens
    draft_first_doubt: float | None = None  # block's tokens before the first with max prob < 0.5
    draft_conf_min: float | None = None  # block's least max probability
    draft_entropy_mean: float | None = None  # block's mean drafter entropy, nats
    draft_margin_mean: float | None = None  # block's mean top-1 minus top-2 probability
    t_link_s: float | None = None  # round start on the link's clock, s (emulated: since the link started; real: epoch)
    outage_s: float | None = None  # link outage within the round (emulated link's outages), s; 0: none crossed
    retries: int | None = None  # resends of the round's DRAFT after a receive timeout or a busy edge (live UE)
    resumed: int | None = None  # re-OPENs with the committed prefix during the round: the edge had lost the session
    t_arrival_s: float | None = None  # the round's committed tokens reached the UE (its reply at the socket;
    #   on-device: generated), s since the prompt's OPEN went out (on-device: since it began); ttft/itl derive from it
    edge_alone: bool | None = None  # auto handed the round to the edge (its target generated alone, no draft);
    #   False: a speculative round of a protocol that may hand rounds over; None: one that never does
    edge_drafted: int | None = None  # tokens the edge drafted itself (--edge-draft): a speculative round's extension
    #   after the UE's draft, verified in the same pass (not in ``drafted``, the UE's K); a round handed to the edge,
    #   the drafts of all its passes.  None: the edge drafted nothing of its own
    edge_accepted: int | None = None  # of them, tokens committed: in a speculative round also counted in
    #   ``accepted`` (every committed draft token of the pass, either source); a round handed to the edge is no
    #   speculative step of ours (``drafted`` and ``accepted`` 0), its edge_accepted is counted there alone
    pred_spec_s_per_token: float | None = None  # auto, before the round: its best speculative round's predicted
    #   seconds per committed token (wisv/timing/handover.py ``choose_round``); None: a protocol that never chooses
    pred_edge_s_per_token: float | None = None  # auto, before the round: the edge generating the chunk alone, its
    #   predicted seconds per token (the chunk it took, or the smallest it priced when it speculated)
    lookup_stopped: bool | None = None  # auto with --lookup-stop-streak, a round the edge generated: its run ended
    #   here, before its tokens, where the UE's prompt lookup agreed again (the next round speculates); else empty
    lookup_stop_streak: int | None = None  # ... a round the edge generated in a run that asked for the stop: the
    #   tokens in a row the lookup had to name (--lookup-stop-adapt chooses it per run); else empty


RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RoundRow))
OLD_NAMES = {"draft_len": "drafted", "ue": "ue_id"}  # columns of files written before the names were unified
TEXT_FIELDS = {"prompt_id": str, "ue_id": str, "protocol": str}  # read as text (a prompt id "0" stays "0")


def to_frame(rows: Iterable[RoundRow | dict]) -> pd.DataFrame:
    """Rows (RoundRows, or their fields as dicts) as a DataFrame, one column per field in RoundRow's order."""
    return pd.DataFrame([asdict(r) if isinstance(r, RoundRow) else r for r in rows], columns=list(RECORD_FIELDS))


def with_current_names(df: pd.DataFrame) -> pd.DataFrame:
    """Rename old columns (``draft_len``, ``ue``) to the record's names, unless the new name is there too."""
    return df.rename(columns={o: n for o, n in OLD_NAMES.items() if o in df and n not in df})


def from_frame(df: pd.DataFrame) -> list[RoundRow]:
    """RoundRows of a records DataFrame (old names read too; missing or NaN fields are None; other columns dropped)."""
    df = with_current_names(df).reindex(columns=list(RECORD_FIELDS))
    clean = df.astype(object).where(df.notna(), None)
    return [RoundRow(**r) for r in clean.to_dict("records")]


def read_records(path: Path | str, **kwargs) -> pd.DataFrame:
    """A rounds.csv / requests.csv / trace CSV with the current column names; empty when the file is missing or
    holds no row.  ``kwargs`` go to pandas.read_csv (prompt_id, ue_id and protocol are read as text)."""
    dtype = TEXT_FIELDS | kwargs.pop("dtype", {})
    try:
        df = pd.read_csv(path, dtype=dtype, **kwargs)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()
    return with_current_names(df)


class RoundLog:
    """Rounds appended to a JSONL file as they happen, one line per RoundRow, flushed at once: a process that is
    killed keeps every round it finished (``read_round_log`` reads them back)."""

    def __init__(self, path: Path | str, append: bool = False):
        self.path = Path(path)
        self._file = self.path.open("a" if append else "w")  # append: after the rows an interrupted run kept

    def append(self, row: RoundRow) -> None:
        self._file.write(json.dumps(asdict(row)) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_round_log(path: Path | str) -> pd.DataFrame:
    """The rounds of a RoundLog file as a records DataFrame (a last line cut short by a kill is skipped)."""
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return to_frame([])
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i < len(lines) - 1:
                raise ValueError(f"{path}: line {i + 1} is not JSON") from None
    return to_frame(rows)
