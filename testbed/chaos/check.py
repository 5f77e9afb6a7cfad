"""The chaos harness's checker (Jepsen-style): invariants over the edge's commit journal and the UEs' records, the
recovery time of each fault, the edge's RSS growth, and the table.  Pure functions of what the run left on disk.

Invariants, each violation one line naming the wave, prompt or session:
- ``stuck``: a prompt of a wave did not finish (no output, or an error);
- ``diverging``: a lossless protocol's output differs from the target-only reference;
- ``lost`` / ``duplicated``: a prompt's rounds (the UE's) are not 0..n-1 once each, or their committed counts do not
  add up to its output; or the journal's commits of its session (the last attempt, across edge restarts and
  resumes, one per round) are not its output's tokens in order;
- ``left``: a session still open on the last edge at the end;
- ``rss``: an edge process grew more than the bound over its level after warm-up.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from protocols.registry import ALL_PROTOCOLS, PROTOCOLS

LOSSLESS = tuple(n for n in ALL_PROTOCOLS if PROTOCOLS[n].desc.lossless)  # greedy acceptance (greedy, tree) or the
#   target alone (server): lossless with the pair's default head (fh/sh/auto keep harmless mismatches)


@dataclass
class Wave:
    """One UE process's batch of prompts (restarted with --keep-done after a kill)."""

    ue: int  # UE index
    ue_id: str  # its testbed.ue --ue-id (session ids are <ue_id>-<prompt index>)
    protocol: str  # testbed.ue --protocol
    prompt_ids: list[str]  # its prompts, in order
    outputs: list[dict] = field(default_factory=list)  # outputs.jsonl records
    rounds: list[dict] = field(default_factory=list)  # rounds.jsonl records


def prompt_violations(w: Wave, refs: dict[str, list[int]] | None) -> list[str]:
    """stuck, diverging, lost and duplicated, from one wave's own records."""
    out, by_id = [], {str(r["prompt_id"]): r for r in w.outputs}
    for pid in w.prompt_ids:
        rec = by_id.get(pid)
        if rec is None or rec.get("error"):
            out.append(f"stuck: {w.ue_id} prompt {pid} did not finish ({(rec or {}).get('error', 'no output')})")
            continue
        rounds = sorted(r["round"] for r in w.rounds if str(r["prompt_id"]) == pid)
        if rounds != list(range(len(rounds))):
            kind = "duplicated" if len(set(rounds)) < len(rounds) else "lost"
            out.append(f"{kind}: {w.ue_id} prompt {pid} rounds {rounds[:8]}... are not 0..n-1 once each")
        committed = sum(r["committed"] for r in w.rounds if str(r["prompt_id"]) == pid)
        if committed != len(rec["tokens"]):
            out.append(f"lost: {w.ue_id} prompt {pid} rounds commit {committed} tokens, its output has "
                       f"{len(rec['tokens'])}")
        if refs is not None and w.protocol in LOSSLESS and rec["tokens"] != refs.get(pid):
            out.append(f"diverging: {w.ue_id} ({w.protocol}) prompt {pid} differs from the target-only reference")
    return out


def journal_commits(events: list[dict]) -> dict[str, list[int]]:
    """Per session id, the tokens the edge(s) committed for its last attempt, one commit per round, in round order.
    An OPEN at round 0 starts an attempt over (a UE restarted after a kill); a resumed OPEN carries on."""
    rounds: dict[str, dict[int, list[int]]] = defaultdict(dict)
    for ev in sorted(events, key=lambda e: e["t"]):
        if ev["ev"] == "open" and ev["round"] == 0:
            rounds[ev["sid"]] = {}
        elif ev["ev"] == "commit":
            rounds[ev["sid"]][ev["round"]] = ev["tokens"]
    return {sid: [t for r in sorted(rs) for t in rs[r]] for sid, rs in rounds.items()}


def journal_violations(waves: list[Wave], events: list[dict]) -> list[str]:
    """lost / duplicated: the journal's committed tokens of each finished prompt against the UE's output."""
    commits, out = journal_commits(events), []
    for w in waves:
        for i, pid in enumerate(w.prompt_ids):
            rec = next((r for r in w.outputs if str(r["prompt_id"]) == pid and not r.get("error")), None)
            sid = f"{w.ue_id}-{i}"
            if rec is not None and commits.get(sid) != rec["tokens"]:
                got = commits.get(sid, [])
                kind = "duplicated" if len(got) > len(rec["tokens"]) else "lost"
                out.append(f"{kind}: session {sid}: the edge committed {len(got)} tokens, the UE's output has "
                           f"{len(rec['tokens'])} (or they differ)")
    return out


def sessions_left(events: list[dict]) -> list[str]:
    """Tokens of the sessions open on the last edge process at the end (opened, never dropped)."""
    if not events:
        return []
    last = max(events, key=lambda e: e["t"])["pid"]
    open_: dict[str, str] = {}
    for ev in sorted((e for e in events if e["pid"] == last), key=lambda e: e["t"]):
        if ev["ev"] == "open":
            open_[ev["token"]] = ev["sid"]
        elif ev["ev"] == "drop":
            open_.pop(ev["token"], None)
    return [f"left: session {sid} still open on the edge at the end" for sid in open_.values()]


ACTIVE_S = 10.0  # a UE was at work when a fault began if it committed a round this long before, s
BLOCKING = ("edge_kill", "edge_stop", "ue_stop", "ue_kill", "outage")  # faults that stop every round while in force


def recoveries(faults: list[dict], commits: dict[int, list[tuple[float, int]]]) -> list[dict]:
    """Per fault and UE it touched: seconds from the fault's end to that UE's next committed round.  ``faults``: dicts
    with kind, start and end (time.time() s), touched (UEs), bound_s; ``commits``: per UE, (time s, wave) of each
    committed round.  A UE counts when it was at work as the fault began (a round within ACTIVE_S before) and its
    next round belongs to the same wave (one that ended meanwhile had nothing left to commit, and a new wave's start
    is not a recovery).  When another blocking fault (BLOCKING) touching the UE is in force between the end and that
    round, the round waits on the later fault: the recovery is the later one's, and this one is marked ``superseded``
    (a PER burst, a rate collapse or a probe slows rounds without stopping them, and stays in the measure)."""
    out = []
    for f in faults:
        for u in f["touched"]:
            ts = commits.get(u, [])
            before = [w for t, w in ts if f["start"] - ACTIVE_S <= t <= f["start"]]
            after = [(t, w) for t, w in ts if t >= f["end"]]
            if not before or not after or after[0][1] != before[-1]:
                continue
            nxt = after[0][0]
            later = any(g is not f and g["kind"] in BLOCKING and u in g["touched"] and g["start"] < nxt
                        and g["end"] > f["end"] for g in faults)
            out.append({"kind": f["kind"], "ue": u, "recovery_s": nxt - f["end"], "bound_s": f["bound_s"],
                        "superseded": later})
    return out


def rss_growth(samples: list[tuple[float, int, int]], warmup_s: float, events: list[dict]) -> dict[int, float]:
    """Per edge PID: largest RSS over its level once warm (``warmup_s`` after its first committed round, from the
    journal ``events``: an idle edge's level is not its working one), minus 1 (0.1: +10%); ``samples``: (time s,
    pid, rss bytes).  An edge process that never got warm is not judged."""
    first = {}
    for ev in events:
        if ev["ev"] == "commit":
            first[ev["pid"]] = min(first.get(ev["pid"], ev["t"]), ev["t"])
    by_pid: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for t, pid, rss in samples:
        by_pid[pid].append((t, rss))
    out = {}
    for pid, s in by_pid.items():
        warm = [r for t, r in s if pid in first and t >= first[pid] + warmup_s]
        if len(warm) >= 2:
            out[pid] = max(warm) / warm[0] - 1.0
    return out


def table(faults: list[dict], recs: list[dict], violations: list[str]) -> str:
    """Faults injected per kind, recovery p50/p99 per kind against its bound (superseded recoveries apart), and the
    violations."""
    lines = [f"{'kind':<14}{'faults':>7}{'superseded':>11}{'recovered':>10}{'p50_s':>8}{'p99_s':>8}{'bound_p99_s':>12}"
             f"{'ok':>5}"]
    sup = [r for r in recs if r["superseded"]]
    recs = [r for r in recs if not r["superseded"]]
    for kind in sorted({f["kind"] for f in faults}):
        rs = [r["recovery_s"] for r in recs if r["kind"] == kind]
        over = [r["recovery_s"] - r["bound_s"] for r in recs if r["kind"] == kind]  # > 0: past its own bound
        bound = np.percentile([r["bound_s"] for r in recs if r["kind"] == kind], 99) if rs else float("nan")
        p50, p99 = (np.percentile(rs, 50), np.percentile(rs, 99)) if rs else (float("nan"),) * 2
        ok = "-" if not rs else "yes" if np.percentile(over, 99) <= 0 else "NO"
        n = sum(f["kind"] == kind for f in faults)
        n_sup = sum(r["kind"] == kind for r in sup)
        lines.append(f"{kind:<14}{n:>7}{n_sup:>11}{len(rs):>10}{p50:>8.2f}{p99:>8.2f}{bound:>12.2f}{ok:>5}")
    lines.append(f"invariant violations: {len(violations)}")
    lines += [f"  {v}" for v in violations[:20]]
    return "\n".join(lines)


def per_kind(faults: list[dict], recs: list[dict]) -> dict:
    """The JSON form of the table."""
    out, sup = {}, [r for r in recs if r["superseded"]]
    recs = [r for r in recs if not r["superseded"]]
    for kind in sorted({f["kind"] for f in faults}):
        rs = [r["recovery_s"] for r in recs if r["kind"] == kind]
        out[kind] = {"faults": sum(f["kind"] == kind for f in faults), "recovered": len(rs),
                     "superseded": sum(r["kind"] == kind for r in sup),
                     "recovery_p50_s": float(np.percentile(rs, 50)) if rs else None,
                     "recovery_p99_s": float(np.percentile(rs, 99)) if rs else None,
                     "bound_p99_s": float(np.percentile([r["bound_s"] for r in recs if r["kind"] == kind], 99))
                     if rs else None,
                     "within_bound_p99": bool(np.percentile([r["recovery_s"] - r["bound_s"] for r in recs
                                                             if r["kind"] == kind], 99) <= 0) if rs else None}
    return out
