"""The judges stage on synthetic labelled mismatches: the dev rule, the link-mode judge, the saved judges and their
provenance (no test pool), and the pure helpers (auc, sweep, choose_tau)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from channel.csi import CSI
from labeling.config import JudgesConfig
from labeling.judges import auc, choose_tau, run, sweep
from labeling.store import save_config
from wisv.head.features import BASE_SCALARS, SCALARS
from wisv.head.store import load_policy_dir
from wisv.pairs import ASSETS_DIR, JUDGE_DIRS

S = len(SCALARS)


@pytest.mark.parametrize("p, y, want", [([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], 1.0), ([0.9, 0.1], [0, 1], 0.0),
                                        ([0.5, 0.5], [0, 1], 0.5), ([0.1, 0.2], [1, 1], float("nan"))])
def test_auc(p, y, want):
    got = auc(np.array(p), np.array(y))
    assert (np.isnan(got) and np.isnan(want)) or got == pytest.approx(want)


def test_the_dev_rule_takes_the_largest_tau_within_the_harm_budget():
    p, y = np.array([0.05, 0.15, 0.25, 0.35, 0.45]), np.array([0, 0, 1, 0, 1])
    sw = sweep(p, y, y, [0.1, 0.2, 0.3, 0.4, 0.5])
    assert sw["accepted_frac"].tolist() == [0.2, 0.4, 0.6, 0.8, 1.0]
    assert choose_tau(sw, 0.0) == 0.2 and choose_tau(sw, 0.34) == 0.4 and choose_tau(sw, 1.0) == 0.5
    assert choose_tau(sweep(p, np.ones(5), y, [0.1]), 0.1) == 0.0  # nothing passes: greedy
    wrong, checkable = np.array([0, 1, 0, 0, 0]), np.array([True, True, False, False, False])
    sw = sweep(p, np.zeros(5), wrong, [0.1, 0.2, 0.3], checkable)
    assert sw["turns_wrong_of_accepted"].tolist() == [0.0, 0.5, 0.5]  # of the checkable accepted only
    assert choose_tau(sw, 1.0, 0.1) == 0.1 and choose_tau(sw, 1.0) == 0.3


def fake_run(tmp_path, name: str, n_episodes: int, per: int, seed: int, answer: str | None = "x",
             sibling: str = "noise"):
    """A run dir whose harm label depends on the NLL margin and the lookahead, as traces.npz + labels.csv; the sib_*
    columns: ``noise``, ``nan`` (collected without the sibling pass) or ``signal`` (the label is sib_agree's)."""
    rng = np.random.default_rng(seed)
    n = n_episodes * per
    edge = rng.normal(size=(n, S - 1)).astype(np.float32)  # every column but out_pos (the last), drawn first
    edge = np.concatenate([edge, np.tile(np.arange(per), n_episodes)[:, None].astype(np.float32)], axis=1)
    margin, look = np.abs(edge[:, SCALARS.index("nll_margin")]), edge[:, SCALARS.index("lookahead")]
    y = (margin - 0.7 * look + 0.3 * rng.normal(size=n) > 0.8).astype(int)
    if sibling == "nan":
        edge[:, len(BASE_SCALARS):len(BASE_SCALARS) + 3] = np.nan  # the sib_* columns
    if sibling == "signal":  # a changed fact leads elsewhere: harmful iff the branches disagree
        y = rng.integers(0, 2, n)
        edge[:, SCALARS.index("sib_agree")] = 1 - y
    run_dir = tmp_path / name
    run_dir.mkdir()
    np.savez_compressed(run_dir / "traces.npz", episode=np.repeat(np.arange(n_episodes), per),
                        position=np.tile(np.arange(per), n_episodes), round=np.zeros(n, int),
                        draft_id=np.arange(n), target_id=np.arange(n) + 1, edge=edge,
                        h_d=rng.normal(size=(n, 6)).astype(np.float16), h_t=rng.normal(size=(n, 5)).astype(np.float16),
                        h_after=rng.normal(size=(n, 5)).astype(np.float16))
    pd.DataFrame({"row": np.arange(n), "draft_id": np.arange(n), "harmful": y, "turns_wrong": 0}).to_csv(
        run_dir / "labels.csv", index=False)
    (run_dir / "episodes.jsonl").write_text("".join(json.dumps({"episode": e, "answer": answer}) + "\n"
                                                    for e in range(n_episodes)))
    save_config(run_dir, "collect", JudgesConfig(), {"prompts_file": str(ASSETS_DIR / "freeform" / "calib.jsonl")})
    return str(run_dir)


@pytest.mark.slow
def test_judges_stage_trains_chooses_on_dev_and_saves_loadable_judges(tmp_path):
    dirs = [fake_run(tmp_path, "a", 60, 10, 0), fake_run(tmp_path, "b", 40, 10, 1, answer=None)]
    cfg = JudgesConfig(run_dirs=tuple(dirs), out_dir=str(tmp_path / "heads"), results_dir=str(tmp_path / "res"),
                       epochs=150, curve_sizes=(100,), max_harm_frac=0.1)
    chosen = run(cfg)
    assert set(chosen) == {"edge", "edge-blind", "autojudge", "judge-decoding", "fly", "nll-margin"}
    assert chosen["edge"]["dev_auc"] > 0.8 > chosen["autojudge"]["dev_auc"]  # the signal is in the edge features
    sw = pd.read_csv(tmp_path / "res" / "judges_sweep.csv")
    for name in ("edge", "nll-margin"):
        row = sw[(sw.judge == name) & (sw.tau.round(4) == round(chosen[name]["tau"], 4))]
        assert row.empty or (row["harmful_of_accepted"].iloc[0] <= 0.1
                             and row["turns_wrong_of_accepted"].iloc[0] <= 0.01)
    edge, tau = load_policy_dir(tmp_path / "heads" / "edge")
    blind, _ = load_policy_dir(tmp_path / "heads" / "edge-blind")
    poor, good = CSI.symmetric(3, 45), CSI.symmetric(200, 5)
    assert edge.threshold(tau, poor) == pytest.approx(tau) and edge.threshold(tau, good) < tau
    assert edge.threshold(tau, good) == pytest.approx(edge.cfg.notes["tau_good"])  # the good link's dev choice
    assert blind.threshold(tau, good) == tau and "h_draft" not in edge.inputs
    assert load_policy_dir(tmp_path / "heads" / "autojudge")[0].cfg.uploads_hidden
    assert json.loads((tmp_path / "res" / "judges.json").read_text())["edge"]["prompt_files"] == \
        ["wisv/assets/freeform/calib.jsonl"] * 2
    assert set(pd.read_csv(tmp_path / "res" / "judges_curve.csv")["features"]) == {"edge", "h_after", "hd_ht",
                                                                                    "edge_h_after", "edge_sib"}


def test_shipped_judges_chose_nothing_on_a_test_pool():
    root = JUDGE_DIRS["smollm2"]
    judges = sorted(root.glob("*/judge.json")) if root.is_dir() else []
    for path in judges:
        notes = json.loads(path.read_text())["notes"]
        assert notes["prompt_files"], path
        for f in notes["prompt_files"]:
            assert f.endswith("calib.jsonl") and "test" not in f and "heldout" not in f, (path, f)


def kinds_run(tmp_path, name: str, kinds: list[str], per: int, seed: int) -> str:
    """fake_run with a kind per episode, flips on some harmful mismatches, and the top-1 feature in [0, 1]."""
    run_dir = fake_run(tmp_path, name, len(kinds), per, seed)
    from pathlib import Path
    d = Path(run_dir)
    (d / "episodes.jsonl").write_text("".join(json.dumps({"episode": e, "answer": "x", "kind": k}) + "\n"
                                              for e, k in enumerate(kinds)))
    lab = pd.read_csv(d / "labels.csv")
    lab["turns_wrong"] = (lab["harmful"] == 1) & (lab["row"] % 3 == 0)
    lab.astype({"turns_wrong": int}).to_csv(d / "labels.csv", index=False)
    tr = dict(np.load(d / "traces.npz"))
    tr["edge"][:, SCALARS.index("top1")] = np.random.default_rng(seed).uniform(0, 1, len(tr["edge"]))
    np.savez_compressed(d / "traces.npz", **tr)
    return run_dir


def test_dev_by_kind_the_bound_rule_and_the_guard(tmp_path):
    kinds = [k for k in ("a", "b", "c", "d", "e") for _ in range(16)]
    d = kinds_run(tmp_path, "k", kinds, 10, 3)
    cfg = JudgesConfig(run_dirs=(d,), out_dir=str(tmp_path / "heads"), results_dir=str(tmp_path / "res"), epochs=100,
                       curve_sizes=(100,), dev_kinds=("d", "e"), flip_budget=0.05, flip_delta=0.1,
                       guard_top1_min=0.9, guard_protect_grid=(5, 3))
    chosen = run(cfg)
    edge = chosen["edge"]
    assert edge["dev"] == 2 * 16 * 10 and edge["train"] == 3 * 16 * 10  # kinds d and e are dev, whole
    assert edge["dev_kinds"] == ["d", "e"] and "Clopper-Pearson" in edge["rule"]
    assert edge["dev_bound"]["flip_upper"] <= 0.05 or edge["tau"] == 0.0
    assert 0.0 <= edge["dev_flip_auc"] <= 1.0
    best = edge["dev_bound_best"]  # the tightest bound of any tau: no chosen tau's bound is below it
    assert best["accepted_checkable"] > 0
    assert best["flip_upper"] <= edge["dev_bound"].get("flip_upper", 1.0) or \
        edge["dev_bound"]["accepted_checkable"] == 0  # an empty acceptance has risk 0 by definition
    sw = pd.read_csv(tmp_path / "res" / "judges_sweep.csv")  # the bound's counts per tau beside the fractions
    e = sw[sw.judge == "edge"]
    assert e["accepted_checkable"].is_monotonic_increasing and (e["flips"] <= e["accepted_checkable"]).all()
    assert (e["flip_upper"] >= e["flips"] / e["accepted_checkable"].clip(lower=1) - 1e-12).all()
    policy, _ = load_policy_dir(tmp_path / "heads" / "edge")
    assert policy.cfg.guard_top1_min == 0.9 and policy.cfg.guard_margin_nats is None  # saved and loaded
    grid = pd.read_csv(tmp_path / "res" / "judges_protect.csv")  # N chosen on dev: the most kept, ties to larger
    assert grid["protect_tokens"].tolist() == [3, 5] and (grid["kept_frac"] <= 7 / 10 + 1e-9).all()
    best = grid.sort_values(["kept_frac", "protect_tokens"]).iloc[-1]
    assert policy.cfg.guard_protect_tokens == best["protect_tokens"] and edge["tau"] == best["tau"]
    kept = sw[sw.judge == "edge"]["accepted_frac"].max()  # at the largest tau of the sweep
    assert 0 < kept <= 7 / 10 + 1e-9  # the first 3 of each prompt's 10 mismatches (out_pos 0-2) are never accepted
    signals = pd.read_csv(tmp_path / "res" / "judges_signals.csv").set_index("signal")
    assert "out_pos" in signals.index and "sib_agree" in signals.index  # every recorded scalar, alone
    assert 0.0 <= signals.loc["out_pos", "dev_flip_auc"] <= 1.0
    peer, _ = load_policy_dir(tmp_path / "heads" / "autojudge")
    assert peer.cfg.guard_config is None  # the peers are as published


def test_a_guarded_judge_never_keeps_a_sure_targets_mismatch():
    import torch

    from wisv.head.features import EdgeFeatures
    from wisv.head.judges import JudgeConfig, JudgePolicy
    cfg = JudgeConfig("n", "nll-margin", ("edge",), (S,), guard_top1_min=0.9, guard_margin_nats=3.0)
    s = torch.zeros(3, S)
    s[:, SCALARS.index("top1")] = torch.tensor([0.95, 0.5, 0.5])
    s[:, SCALARS.index("nll_margin")] = torch.tensor([0.01, 3.5, 0.01])
    p = JudgePolicy(cfg).reject_probs(None, None, [0, 1, 2], None, EdgeFeatures(s, torch.zeros(3, 2)))
    assert p[0] == 1 and p[1] == 1 and p[2] < 0.02
    with pytest.raises(ValueError, match="edge features"):
        JudgePolicy(cfg).reject_probs(None, None, [0], None, None)


@pytest.mark.parametrize("sibling", ["nan", "signal"])
def test_the_learning_curve_reports_edge_sib_only_where_collected(tmp_path, sibling):
    dirs = [fake_run(tmp_path, "a", 40, 10, 0, sibling=sibling)]
    cfg = JudgesConfig(run_dirs=tuple(dirs), out_dir=str(tmp_path / "heads"), results_dir=str(tmp_path / "res"),
                       epochs=150, curve_sizes=(100,), max_harm_frac=0.1)
    run(cfg)
    curve = pd.read_csv(tmp_path / "res" / "judges_curve.csv")
    edge, _ = load_policy_dir(tmp_path / "heads" / "edge")
    assert dict(zip(edge.cfg.inputs, edge.cfg.dims))["edge"] == len(BASE_SCALARS)  # the judges read no sib_* column
    if sibling == "nan":
        assert "edge_sib" not in set(curve.features)
        return
    last = curve[curve.labels == curve.labels.max()].set_index("features")["dev_auc"]
    assert last["edge_sib"] > 0.95 and last["edge"] < 0.7  # the signal only the sibling columns carry
