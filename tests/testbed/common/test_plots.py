"""The figure of a testbed.run: per-prompt latency from outputs.jsonl, AAL from summary.csv, a PNG on disk."""
import json

import pandas as pd
import pytest

from testbed.common.plots import latency_by_prompt, plot_run


def _run_dir(tmp_path):
    """Three prompts, two protocols; fh's second prompt failed."""
    run = tmp_path / "run"
    for proto in ("greedy", "fh"):
        (run / proto).mkdir(parents=True)
    (run / "prompts.jsonl").write_text("".join(json.dumps({"prompt_id": p, "prompt_ids": [1, 2]}) + "\n"
                                               for p in ("7", "3", "5")))
    pd.DataFrame({"protocol": ["greedy", "fh"], "aal": [2.5, 3.25]}).to_csv(run / "summary.csv", index=False)
    rows = {"greedy": [{"prompt_id": "5", "t_e2e_s": 0.5, "error": None},
                       {"prompt_id": "7", "t_e2e_s": 0.7, "error": None},
                       {"prompt_id": "3", "t_e2e_s": 0.3, "error": None}],
            "fh": [{"prompt_id": "7", "t_e2e_s": 0.4, "error": None}, {"prompt_id": "3", "error": "timeout"},
                   {"prompt_id": "5", "t_e2e_s": 0.2, "error": None}]}
    for proto, rs in rows.items():
        (run / proto / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    return run


def test_latency_by_prompt_follows_the_prompt_order_and_skips_failures(tmp_path):
    lat = latency_by_prompt(_run_dir(tmp_path))
    assert list(lat.index) == ["7", "3", "5"] and list(lat.columns) == ["greedy", "fh"]
    assert lat["greedy"].tolist() == pytest.approx([0.7, 0.3, 0.5])
    assert lat["fh"].iloc[[0, 2]].tolist() == pytest.approx([0.4, 0.2]) and pd.isna(lat["fh"].iloc[1])


def test_plot_run_writes_a_png(tmp_path):
    path = plot_run(_run_dir(tmp_path))
    assert path == tmp_path / "run" / "run.png"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_a_protocol_whose_every_prompt_failed_is_a_column_of_nan_and_the_figure_is_still_drawn(tmp_path):
    run = _run_dir(tmp_path)
    (run / "tree").mkdir()
    (run / "tree" / "outputs.jsonl").write_text("".join(json.dumps({"prompt_id": p, "error": "refused"}) + "\n"
                                                        for p in ("7", "3", "5")))
    pd.DataFrame({"protocol": ["greedy", "fh", "tree"], "aal": [2.5, 3.25, None]}).to_csv(run / "summary.csv",
                                                                                           index=False)
    lat = latency_by_prompt(run)
    assert list(lat.columns) == ["greedy", "fh", "tree"] and lat["tree"].isna().all()
    assert plot_run(run).exists()
