"""The UE's half of ``testbed.run --continue`` (``testbed.ue --keep-done``): keep the prompts an interrupted run
completed, with their rounds, and drop the rest (the orchestrator's half, stopping what the run left running, is
testbed/live/orchestrate/cont.py)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from testbed.common.files import complete_lines, write_text_atomic


@dataclass
class Kept:
    """What a UE keeps of an interrupted run: its complete prompts' output records and their round rows."""

    recs: list[dict] = field(default_factory=list)  # output records, in prompt order
    rows: list[dict] = field(default_factory=list)  # their rounds (RoundRow fields), in the order appended

    @property
    def ids(self) -> set[str]:
        return {str(r["prompt_id"]) for r in self.recs}


def keep_done(out: Path, prompt_ids: list[str]) -> Kept:
    """The prompts of ``prompt_ids`` complete (no error) in out/outputs.jsonl and their rounds in out/rounds.jsonl;
    both files are rewritten atomically to hold only those (a prompt cut short, or failed, runs again)."""
    order = {pid: i for i, pid in enumerate(prompt_ids)}
    recs = {str(r["prompt_id"]): r for r in complete_lines(out / "outputs.jsonl")
            if not r.get("error") and str(r["prompt_id"]) in order}
    kept = Kept(sorted(recs.values(), key=lambda r: order[str(r["prompt_id"])]))
    kept.rows = [r for r in complete_lines(out / "rounds.jsonl") if str(r["prompt_id"]) in recs]
    write_text_atomic(out / "outputs.jsonl", "".join(json.dumps(r) + "\n" for r in kept.recs))
    write_text_atomic(out / "rounds.jsonl", "".join(json.dumps(r) + "\n" for r in kept.rows))
    return kept


def in_prompt_order(recs: list[dict], prompt_ids: list[str]) -> list[dict]:
    order = {pid: i for i, pid in enumerate(prompt_ids)}
    return sorted(recs, key=lambda r: order.get(str(r["prompt_id"]), len(order)))
