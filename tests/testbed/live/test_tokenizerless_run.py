"""testbed.run with model directories that hold no tokenizer (random-weight shapes, as scripts/bench/scale.py writes):
prompt_ids rows, OPEN comparing vocabulary sizes only, a summary without accuracy, and --dtype reaching both
processes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from testbed.common.link import LinkSpec
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.run import RunConfig, run
from testbed.live.ue.ueconfig import UEConfig
from tests.tiny_pair import make_pair
from wisv.models.loader import has_tokenizer

VOCAB, EOS = 300, 299


@pytest.mark.slow
def test_a_pair_without_tokenizer_runs_in_bf16_from_prompt_ids(tmp_path: Path) -> None:
    torch.manual_seed(0)
    for name, model in zip(("drafter", "target"), make_pair(vocab=VOCAB, eos=EOS)):
        model.save_pretrained(tmp_path / name)
        assert not has_tokenizer(tmp_path / name)
    rows = [{"prompt_id": f"p{i}", "prompt_ids": [5 + i, 17, 42, 7]} for i in range(2)]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = RunConfig(protocol="sh", prompts=2, prompts_file=str(tmp_path / "prompts.jsonl"), out=str(tmp_path / "run"),
                    dtype="bfloat16", ue=UEConfig(max_new_tokens=6, drafter=str(tmp_path / "drafter"), probe_bytes=0),
                    edge=ServeConfig(target=str(tmp_path / "target"), head="accept-all"),
                    link=LinkSpec(rate_up_mbps=None, rate_down_mbps=None, rtt_ms=0.0))
    [summary] = run(cfg)
    assert (summary["errors"], summary["accuracy"]) == (0, None) and 0 < summary["generated_tokens"] <= 12
    assert "'dtype': 'bfloat16'" in (tmp_path / "run" / "edge.log").read_text()
    log = (tmp_path / "run" / "sh" / "ue0.log").read_text().splitlines()
    ue_config = next(ln for ln in log if ln.startswith("CONFIG"))
    assert json.loads(ue_config.removeprefix("CONFIG "))["dtype"] == "bfloat16"
