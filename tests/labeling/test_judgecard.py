"""The card's live section: each run's summary and, where the run compared protocols, its paired rows by group."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from labeling.judgecard import live_section


def test_live_section_gives_paired_rows_by_group(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    pd.DataFrame([{"protocol": "greedy", "prompts": 2, "accuracy": 1.0, "aal": 1.0},
                  {"protocol": "auto", "prompts": 2, "accuracy": 0.5, "aal": 2.0}]).to_csv(run / "summary.csv")
    (run / "config.json").write_text(json.dumps({"head_resolved": "/x/edge"}))
    base = {"group": "unseen question", "prompts": 2, "rounds_per_prompt": 10.0, "latency_s": 2.0, "accuracy": 1.0,
            "fluency_ppl_ratio": 1.0, "fluency_ext_ppl_ratio": 1.0, "drift_rouge_l": 1.0}
    pd.DataFrame([{**base, "protocol": "greedy", "aal": 1.0},
                  {**base, "protocol": "auto", "aal": 2.0, "rounds_per_prompt": 6.0, "accuracy": 0.5,
                   "fluency_ppl_ratio": 1.2}]).to_csv(run / "summary_by_group.csv", index=False)
    pd.DataFrame([{"protocol": "auto", "against": "greedy", "group": g, "n": 2, "lost": 1, "gained": 0,
                   "delta": -0.5, "ci_low": -1.0, "ci_high": 0.0, "mcnemar_p": 1.0}
                  for g in ("all", "unseen question")]).to_csv(run / "paired.csv", index=False)
    text = live_section((f"poor={run}",))
    table = text.split("### By group")[1]
    assert "| poor | unseen question | auto | greedy | 2 | 100.0 | -40.0 |" in table and "| all |" not in table
    with pytest.raises(ValueError, match="NAME=RUN_DIR"):
        live_section((str(run),))
