"""The tree protocol end to end: UE processes, the link relay and the edge process; output equals target greedy."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from testbed.common.link import LinkSpec
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.run import RunConfig, run
from testbed.live.ue.ueconfig import UEConfig


@pytest.mark.slow
def test_tree_protocol_through_testbed_run(pair_dirs, tmp_path: Path) -> None:
    ue = UEConfig(max_new_tokens=24, drafter=str(pair_dirs.drafter), probe_bytes=1024, tree_budget=6, proactive=3)
    cfg = RunConfig(protocol="tree", prompts=4, out=str(tmp_path), ue=ue, ues=2,
                    edge=ServeConfig(target=str(pair_dirs.target)),
                    link=LinkSpec(rate_up_mbps=None, rate_down_mbps=None, rtt_ms=0.0))
    [summary] = run(cfg)
    assert (summary["protocol"], summary["errors"], summary["matches_target"]) == ("tree", 0, 1.0)
    rounds = pd.read_csv(tmp_path / "tree" / "rounds.csv")
    assert (rounds["protocol"] == "tree").all() and (rounds["tree_size"] == rounds["drafted"]).all()
    assert (rounds["tree_size"] <= 6 + 3).all() and (rounds["tree_depth"] <= rounds["tree_size"]).all()
    assert (rounds["accepted_depth"] == rounds["accepted"]).all() and (rounds["accepted"] <= rounds["tree_depth"]).all()
    assert (rounds["proactive_drafted"] <= 3).all()
