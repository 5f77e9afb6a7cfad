"""What testbed.run gathers after each protocol's UEs: their rounds and outputs merged into the protocol's files and
summarized, the remote edge's reported settings, and ``--show``'s outputs beside the reference text."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from testbed.common.files import write_csv_atomic, write_json_atomic, write_text_atomic
from testbed.common.summary import summarize
from testbed.common.text import decoder, show
from testbed.live.orchestrate.runconfig import RunConfig
from wisv.records.rows import read_records, read_round_log


def show_outputs(cfg: RunConfig, out: Path, prompts: pd.DataFrame, tok, refs) -> str:
    """--show N: the first N prompts' outputs of every protocol beside the reference text."""
    outputs = {p: pd.read_json(out / p / "outputs.jsonl", lines=True, dtype={"prompt_id": str})
               for p in cfg.protocols()}
    return show(cfg.show, prompts, outputs, refs, decoder(tok))


def record_edge(cfg: RunConfig, out: Path, pdir: Path) -> str | None:
    """With --edge: the edge's settings, as the UEs got them in OPEN_OK, into config.json; the head it reports (None
    when the protocol opened no session there: on-device)."""
    path = pdir / "ue0" / "edge.json"
    if cfg.remote_edge is None or not path.exists():
        return None
    reported = json.loads(path.read_text())
    if not reported:
        return None
    saved = json.loads((out / "config.json").read_text())
    saved |= {"edge_reported": reported, "head_resolved": reported.get("head"), "tau_resolved": reported.get("tau")}
    write_json_atomic(out / "config.json", saved)
    return reported.get("head")


def merge_rounds(pdir: Path) -> pd.DataFrame:
    """The UEs' rounds merged into <pdir>/rounds.csv: each UE's rounds.csv, or for a UE that was killed before
    writing it, the rounds it appended to rounds.jsonl as they happened."""
    frames = []
    for d in sorted(d for d in pdir.glob("ue*") if d.is_dir()):
        f = read_records(d / "rounds.csv") if (d / "rounds.csv").exists() else read_round_log(d / "rounds.jsonl")
        frames += [f] if len(f) else []
    rounds = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if pdir.is_dir():
        write_csv_atomic(pdir / "rounds.csv", rounds)
    return rounds


def collect(proto: str, pdir: Path, rounds: pd.DataFrame, prompts: pd.DataFrame, tok, refs, scorer=None,
             ext=None) -> tuple[dict, pd.DataFrame]:
    """Merge the UEs' outputs into <pdir>/outputs.jsonl, then summarize with the merged rounds: (summary, outputs)."""
    ue_dirs = sorted(d for d in pdir.glob("ue*") if d.is_dir())
    outputs = pd.concat([pd.read_json(d / "outputs.jsonl", lines=True, dtype={"prompt_id": str}) for d in ue_dirs],
                        ignore_index=True)  # an id such as "7" stays text, as in prompts.jsonl
    write_text_atomic(pdir / "outputs.jsonl", outputs.to_json(orient="records", lines=True, force_ascii=False))
    return summarize(proto, rounds, outputs, prompts, tok.decode if tok is not None else None, refs, scorer,
                     ext), outputs
