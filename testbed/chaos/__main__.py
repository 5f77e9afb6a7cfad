"""Chaos harness: every fault at once, many UEs, and a checker of invariants (``python -m testbed.chaos``).

Usage: ``python -m testbed.chaos --seed 7 --duration-s 90 --ues 6 --out runs/chaos``.  A batching edge (the pair's
default head) serves N UEs with mixed protocols (greedy, fh, sh, auto, tree, greedy with --draft-len auto) through
the link emulator on a varying trace, while faults drawn from ``--seed`` (testbed/chaos/schedule.py: the same seed
replays the same schedule) kill, stop and restart the edge and the UEs, cut and degrade the link, and run hostile
probes.  Writes ``chaos.json`` (schedule, faults as run, recoveries, per-kind table, violations, RSS growth) to
``--out`` and prints the table; exits 1 when an invariant was violated (testbed/chaos/check.py).
"""
from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import config
from testbed.chaos import check
from testbed.chaos.run import execute
from testbed.common.files import complete_lines, prepare_out, write_json_atomic
from wisv.models.loader import builtin_paths, load_model, load_tokenizer, resolve_dtype
from wisv.tasks.evaluate import greedy_reference
from wisv.tasks.prompts import prompt_rows

PROG = "python -m testbed.chaos"


@dataclass
class ChaosConfig:
    """Chaos harness settings."""

    seed: int = 0  # draws the fault schedule and the link trace (the same seed: the same schedule)
    duration_s: float = field(default=90.0, metadata={"above": 0})  # faults start within this long, s
    warmup_s: float = field(default=10.0, metadata={
        "min": 0})  # no fault before this; an edge's RSS level is taken this long after its first commit, s
    mean_gap_s: float = field(default=5.0, metadata={"above": 0})  # mean time between two fault starts, s
    max_outage_s: float = field(default=20.0, metadata={"min": 1})  # longest link outage, s
    ues: int = field(default=6, metadata={"min": 1})  # UE processes (protocols cycle through the mix)
    prompts_per_wave: int = field(default=3, metadata={"min": 1})  # prompts per UE process; waves follow waves
    max_new_tokens: int = field(default=32, metadata={"min": 1})  # generation budget per prompt, tokens
    heartbeat_ivl_ms: int = field(default=500, metadata={"min": 0})  # the UEs' keepalive interval, ms
    heartbeat_timeout_ms: int = field(default=3000, metadata={"min": 1})  # the edge frees sessions silent this long, ms
    settle_s: float = field(default=180.0, metadata={"above": 0})  # after the schedule, the waves must end within, s
    rss_growth_max: float = field(default=0.10, metadata={"min": 0})  # an edge process may grow this much after warm-up
    drafter: str | None = None  # local HF drafter directory (None: built-in toy drafter)
    target: str | None = None  # local HF target directory (None: built-in toy target)
    out: str = "runs/chaos"  # output directory (chaos.json, journal.jsonl, per-UE waves, logs)
    overwrite: bool = False  # empty a non-empty --out first


def references(cfg: ChaosConfig, waves: list[check.Wave], rows: list[dict]) -> dict[str, list[int]]:
    """Target-only greedy outputs of the prompts the lossless protocols ran."""
    want = {p for w in waves if w.protocol in check.LOSSLESS for p in w.prompt_ids}
    target = load_model(Path(cfg.target) if cfg.target else builtin_paths()[1], "target", "cpu",
                        resolve_dtype("auto", "cpu"))
    return {str(r["prompt_id"]): greedy_reference(target, list(r["prompt_ids"]), cfg.max_new_tokens)
            for r in rows if str(r["prompt_id"]) in want}


def judge(cfg: ChaosConfig, res: dict, events: list[dict], refs: dict) -> dict:
    """Violations, recoveries and RSS growth of one run."""
    faults = [_restarted(f, events) for f in res["faults"]]
    violations = [p for p in res["problems"] if not p.startswith("note: ")]
    for w in res["waves"]:
        violations += check.prompt_violations(w, refs)
    violations += check.journal_violations(res["waves"], events) + check.sessions_left(events)
    growth = check.rss_growth(res["rss"], cfg.warmup_s, events)
    violations += [f"rss: edge PID {pid} grew {g:+.1%} after warm-up (bound {cfg.rss_growth_max:.0%})"
                   for pid, g in growth.items() if g > cfg.rss_growth_max]
    recs = check.recoveries(faults, res["commits"])
    return {"faults": faults, "recoveries": recs, "violations": violations, "rss_growth": growth,
            "per_kind": check.per_kind(faults, recs)}


def _restarted(f: dict, events: list[dict]) -> dict:
    """A UE kill ends when the restarted UE is back: its first OPEN after the kill (the journal's)."""
    if f["kind"] != "ue_kill":
        return f
    opens = [e["t"] for e in events
             if e["ev"] == "open" and e["sid"].startswith(f"{f['ue_id']}-") and e["t"] >= f["start"]]
    return {**f, "end": min(opens, default=f["end"])}


def run(cfg: ChaosConfig) -> dict:
    out = Path(cfg.out)
    prepare_out(out, cfg.overwrite)
    config.write_config(out, cfg, config.provenance())
    drafter_dir = Path(cfg.drafter) if cfg.drafter else builtin_paths()[0]
    rows = prompt_rows(load_tokenizer(drafter_dir, "drafter"), "test", None)
    t0 = time.time()
    res = execute(cfg, out, rows)
    events = complete_lines(out / "journal.jsonl")
    refs = references(cfg, res["waves"], rows)
    verdict = judge(cfg, res, events, refs)
    kinds = {f["kind"] for f in verdict["faults"]}
    doc = {"config": asdict(cfg), "command": " ".join([PROG, *sys.argv[1:]]), "wall_s": time.time() - t0,
           "ues": cfg.ues, "faults_injected": len(verdict["faults"]), "fault_kinds": len(kinds),
           "prompts_finished": sum(len([r for r in w.outputs if not r.get("error")]) for w in res["waves"]),
           "rounds": sum(len(w.rounds) for w in res["waves"]), "edge_load_s": res["edge_load_s"],
           "per_kind": verdict["per_kind"], "violations": verdict["violations"],
           "notes": [p for p in res["problems"] if p.startswith("note: ")],
           "rss_growth": {str(k): v for k, v in verdict["rss_growth"].items()},
           "schedule": [f.to_dict() for f in res["schedule"]], "faults": verdict["faults"],
           "recoveries": verdict["recoveries"],
           "commits": {str(u): ts for u, ts in res["commits"].items()}}  # (time s, wave) of each UE's rounds
    write_json_atomic(out / "chaos.json", doc)
    doc["table"] = check.table(verdict["faults"], verdict["recoveries"], verdict["violations"])
    return doc


def parse_args(argv: list[str] | None = None) -> ChaosConfig:
    return config.parse(ChaosConfig, argv, prog=PROG, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    try:
        doc = run(cfg)
    except ValueError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"seed {cfg.seed}: {doc['faults_injected']} faults of {doc['fault_kinds']} kinds, {cfg.ues} UEs, "
          f"{doc['wall_s']:.0f} s, {doc['prompts_finished']} prompts, {doc['rounds']} rounds")
    print(doc["table"])
    print(f"results in {cfg.out}/chaos.json")
    sys.exit(1 if doc["violations"] else 0)


if __name__ == "__main__":
    main()
