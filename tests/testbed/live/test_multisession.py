"""Four UE processes share one edge process through the link relay and all reproduce target-only greedy output."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from testbed.common.link import LinkSpec
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.run import RunConfig, run
from testbed.live.ue.ueconfig import UEConfig

UES, PROMPTS = 4, 8


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["fh", "sh"])
def test_four_ues_share_one_edge(pair_dirs, tmp_path: Path, protocol: str) -> None:
    ue = UEConfig(draft_len=4, max_new_tokens=24, drafter=str(pair_dirs.drafter), probe_bytes=1024)
    cfg = RunConfig(protocol=protocol, prompts=PROMPTS, out=str(tmp_path), ue=ue, ues=UES,
                    edge=ServeConfig(target=str(pair_dirs.target)),
                    link=LinkSpec(rate_up_mbps=None, rate_down_mbps=None, rtt_ms=0.0))
    [summary] = run(cfg)
    assert (summary["protocol"], summary["prompts"], summary["errors"]) == (protocol, PROMPTS, 0)
    assert summary["matches_target"] == 1.0
    pdir = tmp_path / protocol
    outputs = pd.read_json(pdir / "outputs.jsonl", lines=True)
    prompt_ids = [json.loads(line)["prompt_id"] for line in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert sorted(outputs["prompt_id"].astype(str)) == sorted(prompt_ids) and len(set(prompt_ids)) == PROMPTS
    assert outputs.groupby("ue_id").size().to_dict() == {f"ue{u}": PROMPTS // UES for u in range(UES)}
    rounds = pd.read_csv(pdir / "rounds.csv")
    assert set(rounds["ue_id"]) == {f"ue{u}" for u in range(UES)} and (rounds["protocol"] == protocol).all()
    if protocol == "sh":
        assert (rounds["queried"] == rounds["mismatches"]).all() and rounds["mismatches"].gt(0).any()
    for u in range(UES):
        assert (pdir / f"ue{u}" / "outputs.jsonl").read_text().count("\n") == PROMPTS // UES
        assert len(pd.read_csv(pdir / f"ue{u}" / "rounds.csv")) > 0
    assert "READY tcp://127.0.0.1:" in (tmp_path / "edge.log").read_text()
