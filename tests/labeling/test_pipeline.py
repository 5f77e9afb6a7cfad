"""The labeling CLI end to end on the built-in pair at toy sizes: every stage's files, re-runnable stages, export."""
import json

import numpy as np
import pandas as pd
import pytest

from labeling.__main__ import main
from labeling.config import parse_channels
from testbed.common.heads import load_policy
from wisv.head.model import HeadPolicy
from wisv.head.store import load_head


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("labeling")
    rd = ["--run-dir", str(d)]
    assert main(["collect", *rd, "--prompts", "8", "--draft-len", "8"]) == 0
    assert main(["label", *rd]) == 0
    assert main(["relabel", *rd, "--m-csi", "3"]) == 0
    for variant in ("csi", "nocsi"):
        assert main(["train", *rd, "--variant", variant, "--epochs", "3", "--val-frac", "0.25"]) == 0
    assert main(["evaluate", *rd, "--prompts", "3", "--taus", "0.5", "--draft-len", "8"]) == 0
    assert main(["curve", *rd, "--sizes", "10", "--epochs", "2", "--test-frac", "0.25"]) == 0
    assert main(["export", *rd, "--to", str(d / "exported")]) == 0
    return d


@pytest.mark.slow  # the run_dir fixture trains heads
def test_collect_and_label_files(run_dir):
    with np.load(run_dir / "traces.npz") as tr:
        n, d_d, d_t = len(tr["episode"]), tr["h_d"].shape[1], tr["h_t"].shape[1]
        assert set(np.unique(tr["episode"])) <= set(range(8))
        assert np.all(tr["draft_id"] != tr["target_id"])
    assert (d_d, d_t) == (96, 192) and n > 0
    labels = pd.read_csv(run_dir / "labels.csv")
    assert len(labels) == n and set(labels["harmful"]) <= {0, 1}
    assert set(labels["kind"]) <= {"word-word", "digit-digit", "digit-word"}
    assert (labels["changed"] == (labels["outcome_forced"] != labels["outcome_target"])).all()
    turns_wrong = labels["outcome_target"] & ~labels["outcome_forced"]
    assert (labels["harmful"] == (turns_wrong | labels["disfluent"].astype(bool))).all()
    assert not (labels["harmful"].astype(bool) & labels["helpful"].astype(bool)).any()


@pytest.mark.slow  # the run_dir fixture trains heads
def test_relabel_train_and_evaluate_outputs(run_dir):
    csi, nocsi = np.load(run_dir / "instances_csi.npz"), np.load(run_dir / "instances_nocsi.npz")
    assert len(csi["a"]) == 3 * len(nocsi["a"]) and np.all(csi["a"] <= csi["u"])
    assert load_head(run_dir / "heads" / "csi").cfg.csi_dim == 5
    assert load_head(run_dir / "heads" / "nocsi").cfg.csi_dim == 0  # constant CSI: the ablation head has no CSI input
    assert (run_dir / "train_csi.png").stat().st_size > 0 and len(pd.read_csv(run_dir / "train_csi.csv")) == 3
    ev = pd.read_csv(run_dir / "evaluate.csv")
    assert set(ev["variant"]) == {"greedy", "csi", "nocsi"} and set(ev["channel"]) == {"good", "poor"}
    assert ev["latency_s"].gt(0).all() and ev["accuracy"].between(0, 1).all()
    for png in ("accuracy_vs_tau.png", "aal_vs_tau.png", "fig3_accuracy_vs_tau.png", "fig5_csi_vs_blind.png"):
        assert (run_dir / png).stat().st_size > 0
    greedy = ev[ev.variant == "greedy"].iloc[0]  # greedy SD is the target's own output: no drift, same fluency
    assert greedy.matches_target == 1.0 and greedy.drift_rouge_l == 1.0 and greedy.fluency_ppl_ratio == 1.0
    assert ev["drift_rouge_l"].between(0, 1).all() and ev["fluency_ppl_ratio"].gt(0).all()
    curve = pd.read_csv(run_dir / "learning_curve.csv")
    assert len(curve) >= 1 and curve["n_train"].iloc[-1] > 10
    assert json.loads((run_dir / "config_evaluate.json").read_text())["prompts"] == 3


@pytest.mark.slow  # the run_dir fixture trains heads
def test_a_stage_reruns_without_redoing_earlier_ones(run_dir):
    before = (run_dir / "traces.npz").stat().st_mtime_ns, (run_dir / "labels.csv").stat().st_mtime_ns
    assert main(["relabel", "--run-dir", str(run_dir), "--m-csi", "3"]) == 0
    assert ((run_dir / "traces.npz").stat().st_mtime_ns, (run_dir / "labels.csv").stat().st_mtime_ns) == before


@pytest.mark.slow  # the run_dir fixture trains heads
def test_exported_head_loads_on_the_edge_with_its_tau(run_dir):
    headline = json.loads((run_dir / "headline.json").read_text())
    policy, tau, desc = load_policy(str(run_dir / "exported"), None, None, 192)
    assert isinstance(policy, HeadPolicy) and tau == headline["tau"] == 0.5
    card = (run_dir / "exported" / "HEAD_CARD.md").read_text()
    assert card.startswith("# WISV decision head") and "## Labels" in card and "## Learning curve" in card
    assert "| all |" in card and "drift (ROUGE-L F1)" in card


def test_missing_stage_and_bad_input_give_clear_errors(tmp_path, capsys):
    assert main(["label", "--run-dir", str(tmp_path)]) == 2
    assert "run `python -m labeling collect" in capsys.readouterr().err
    with pytest.raises(ValueError, match="NAME=RATE_MBPS/RTT_MS"):
        parse_channels(["poor=2"])
    with pytest.raises(SystemExit):
        main(["evaluate", "--run-dir", str(tmp_path), "--channels", "poor=2"])
    assert parse_channels(["a=2/50", "b=500/5"]) == {"a": (2.0, 50.0), "b": (500.0, 5.0)}
