"""The report figure of a testbed.run: per-prompt latency from outputs.jsonl, AAL from summary.csv, the round split
and CSI from rounds.csv, a title from config.json, a PNG on disk; and one colour per protocol."""
import json

import pandas as pd
import pytest

from testbed.common.plots import PROTOCOL_COLORS, latency_by_prompt, plot_run, protocol_color, run_title, time_split_ms
from wisv.records.rows import RoundRow, to_frame


def _run_dir(tmp_path):
    """Three prompts, two protocols; fh's second prompt failed."""
    run = tmp_path / "run"
    for proto in ("greedy", "fh"):
        (run / proto).mkdir(parents=True)
    (run / "prompts.jsonl").write_text("".join(json.dumps({"prompt_id": p, "prompt_ids": [1, 2]}) + "\n"
                                               for p in ("7", "3", "5")))
    pd.DataFrame({"protocol": ["greedy", "fh"], "aal": [2.5, 3.25], "rounds_per_prompt": [4.0, 3.0]}).to_csv(
        run / "summary.csv", index=False)
    for proto in ("greedy", "fh"):
        rows = [RoundRow(prompt_id="7", round=i, protocol=proto, drafted=4, accepted=2, uplink_bytes=300,
                         downlink_bytes=150, t_draft_s=0.01, t_comm_s=0.02, t_verify_s=0.005, t_head_s=0.0,
                         t_round_s=0.04, rtt_ms=20.0, rate_up_mbps=20.0, rate_down_mbps=20.0, est_rtt_ms=21.0,
                         est_rate_up_mbps=19.0, est_rate_down_mbps=19.5) for i in range(3)]
        to_frame(rows).to_csv(run / proto / "rounds.csv", index=False)
    (run / "config.json").write_text(json.dumps({"pair": "smollm2", "draft_len": 8, "link_emulated": True,
                                                 "link": {"rate_up_mbps": 20.0, "rate_down_mbps": 20.0, "rtt_ms": 20.0},
                                                 "head_resolved": "/x/assets/smollm2-head (tau=0.5)",
                                                 "csi_resolved": "configured"}))
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


@pytest.mark.slow
def test_plot_run_writes_a_png(tmp_path):
    path = plot_run(_run_dir(tmp_path))
    assert path == tmp_path / "run" / "run.png"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


@pytest.mark.slow
def test_plot_run_survives_a_run_whose_every_prompt_failed(tmp_path):
    run = _run_dir(tmp_path)
    (run / "fh" / "outputs.jsonl").write_text(json.dumps({"prompt_id": "7", "error": "timeout"}) + "\n")
    (run / "fh" / "rounds.csv").write_text("")
    assert latency_by_prompt(run)["fh"].isna().all()
    assert plot_run(run).exists()


def test_time_split_adds_up_to_the_round_time():
    rounds = to_frame([RoundRow(prompt_id="p", round=0, drafted=4, accepted=2, t_draft_s=0.010, t_comm_s=0.020,
                                t_verify_s=0.005, t_head_s=0.001, t_round_s=0.040)])
    split = time_split_ms(rounds)
    assert split == pytest.approx({"draft": 10.0, "comm": 20.0, "verify": 5.0, "head": 1.0, "other": 4.0})
    assert sum(time_split_ms(pd.DataFrame()).values()) == 0


def test_title_names_pair_link_k_head_and_csi():
    cfg = {"pair": "smollm2", "draft_len": 6, "link_emulated": True, "csi_resolved": "measured",
           "link": {"rate_up_mbps": 3.0, "rate_down_mbps": 3.0, "rtt_ms": 45.0}, "head_resolved": "/a/b/head (tau=0.5)"}
    assert run_title(cfg, "r") == "r: pair smollm2, link 3/3 Mbps, RTT 45 ms, K=6, head b/head (tau=0.5), CSI measured"
    assert run_title({}, "r") == "r"


def test_every_protocol_has_its_own_colour():
    assert len(set(PROTOCOL_COLORS.values())) == len(PROTOCOL_COLORS)
    assert protocol_color("WISV-SH") == protocol_color("SH (lossless)") == PROTOCOL_COLORS["sh"]
    assert protocol_color("tree") != protocol_color("greedy")


@pytest.mark.slow
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
