"""testbed.run --drafter-head: the UE asks for the target's features, drafts with a feature head, and greedy stays
the target's output; every VERDICT's bytes are the payload model's."""
from __future__ import annotations

from pathlib import Path

import pytest

from protocols.accounting import wire_payload_bits
from scripts.train.feature_drafter import FeatureDrafterConfig
from scripts.train.feature_drafter import run as train
from testbed.common.link import LinkSpec
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.run import RunConfig, run
from testbed.live.ue.ueconfig import UEConfig
from wisv.records.rows import read_records

SLACK_BYTES = 8  # header ints take 1-3 bytes by value: the model charges typical ones


@pytest.mark.slow
@pytest.mark.parametrize("rows", [1, 3])
def test_greedy_with_a_feature_head_over_the_link_is_the_target_s_output(tmp_path: Path, rows: int) -> None:
    head = tmp_path / "head"
    train(FeatureDrafterConfig(out=str(head), prompts=4, max_new_tokens=40, window=16, batch=4, steps=40,
                               eval_prompts=0))
    cfg = RunConfig(protocol="greedy", prompts=2, out=str(tmp_path / "run"),
                    ue=UEConfig(max_new_tokens=40, drafter_head=str(head), probe_bytes=0, feature_rows=rows),
                    edge=ServeConfig(head="none"), link=LinkSpec(rate_up_mbps=None, rate_down_mbps=None, rtt_ms=0.0))
    [summary] = run(cfg)
    assert summary["errors"] == 0 and summary["matches_target"] == 1.0
    rounds = read_records(tmp_path / "run" / "greedy" / "rounds.csv")
    d_t, vocab = 192, 637  # the built-in target's width and vocabulary
    sent = (rounds["accepted"] + 1).clip(upper=rows)  # the committed positions' rows, the newest ones
    assert len(rounds) > 0 and (rounds["feature_bytes"] == sent * d_t * 2).all()
    for n, group in rounds.groupby(sent):
        pb = wire_payload_bits(d_t, vocab, target_features=int(n), d_t=d_t)
        model = (pb.s_fb + pb.tf_bits + pb.o_dn) / 8
        assert ((group["downlink_bytes"] - model).abs() <= SLACK_BYTES).all(), (group["downlink_bytes"].tolist(), model)
    assert rows == 1 or sent.max() > 1  # some VERDICT brought more than one row
    assert rounds["accepted"].sum() > 0  # the trained head's drafts are accepted some of the time
