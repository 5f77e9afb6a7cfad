"""The learning curve's fixed sample of the suite's test pools (groups by family x role, spread over kinds) and the
model card's table of AAL per kind group."""
from __future__ import annotations

import json

import pytest

from scripts.cards import smollm2_card
from scripts.train.drafter_curve import POOLED, CurveConfig, plot_path, sample_groups, suite_sample
from wisv.tasks import suite


def _row(kind: str, i: int) -> dict:
    return {"prompt_id": f"su-{kind}-{i:03d}", "kind": kind, "prompt": f"{kind} {i}"}


@pytest.mark.parametrize("n, want", [(1, 1), (4, 4), (7, 5)])  # 5 rows in all: n beyond that takes every one
def test_sample_groups_take_kinds_in_turn(n, want):
    rows = [_row("author", i) for i in range(3)] + [_row("currency", i) for i in range(2)]  # both unseen questions
    got = sample_groups(rows, n, seed=3)["question-unseen"]
    assert len(got) == want
    kinds = [r["kind"] for r in got]
    assert kinds[:2] == ["author", "currency"][:len(kinds[:2])]  # one of each kind before a second of any
    assert got == sample_groups(rows, n, seed=3)["question-unseen"]


def test_the_suite_sample_is_fixed_and_grouped_by_role_and_family():
    groups = suite_sample(6, 1234)
    assert set(groups) == {"question-seen", "question-unseen", "free-seen", "free-unseen"}
    assert set(POOLED["free"]) <= set(groups)
    for name, rows in groups.items():
        fam, role = name.split("-")
        assert len(rows) == 6 and len({r["kind"] for r in rows}) == 6  # six kinds, one prompt each
        assert all(suite.family(r["kind"]) == fam and suite.role(r["kind"]) == role for r in rows)
    test_ids = {r["prompt_id"] for r in suite.load_suite("test") + suite.load_suite("test", "free")}
    assert {r["prompt_id"] for rs in groups.values() for r in rs} <= test_ids
    assert suite_sample(6, 1234) == groups and suite_sample(6, 7) != groups


def test_the_calib_sample_holds_dev_kinds_and_no_test_prompt():
    """--pool calib: the groups a drafter choice is made on; its 'unseen' stand-in is the dev kinds."""
    groups = suite_sample(4, 1234, "calib")
    assert set(groups) == {"question-seen", "question-dev", "free-seen", "free-dev"}
    assert {r["kind"] for r in groups["question-dev"] + groups["free-dev"]} <= set(suite.DEV_KINDS)
    test_ids = {r["prompt_id"] for r in suite.load_suite("test") + suite.load_suite("test", "free")}
    assert not {r["prompt_id"] for rs in groups.values() for r in rs} & test_ids


def test_the_card_tabulates_aal_per_kind_group(tmp_path):
    aal = {"question-seen": 1.2, "question-unseen": 0.7, "free-seen": 0.5, "free-unseen": 0.4, "free": 0.45}
    curve = {"config": {"draft_len": 8, "max_new_tokens": 64, "out": "c.json"}, "run_dir": "runs/x",
             "groups": {g: {"n": 2, "kinds": ["a", "b"]} for g in aal if g != "free"},
             "points": [{"tokens": 0, "step": 0, "aal": dict.fromkeys(aal, 0.05)},
                        {"tokens": 25_000, "step": 40, "aal": aal}],
             "built": {"drafter": "/c/pairs/smollm2/drafter", "aal": aal}}
    path = tmp_path / "curve.json"
    path.write_text(json.dumps(curve))
    text = smollm2_card._kind_groups(str(path))
    assert "| questions, unseen kinds |" in text.replace("| questions, seen kinds ", "")
    assert "| step 40 | 25,000 | 1.2 | 0.7 | 0.5 | 0.4 | 0.45 |" in text
    assert "| undistilled | 0 |" in text and "| built drafter (`drafter`) | |" in text
    assert "No learning-curve" in smollm2_card._kind_groups(str(tmp_path / "none.json"))


@pytest.mark.slow
def test_group_aal_gives_each_group_and_kind_and_drafts_with_a_given_session():
    """Per group, pooled group and kind; a kind alone in its group has the group's AAL; a feature head (make_draft)
    drafts instead of the drafter and the output stays the target's (AAL differs, rounds are counted)."""
    import torch

    from scripts.train.drafter_curve import CurveConfig, group_aal
    from wisv.decoding.featdraft import FeatureDraftSession, FeatureHead
    from wisv.models.loader import load_pair
    from wisv.tasks.prompts import prompt_rows
    torch.set_num_threads(1)
    drafter, target, tok = load_pair()
    ids = [r["prompt_ids"] for r in prompt_rows(tok, "test", 3)]
    groups = {"free-seen": [{"prompt_id": "a", "kind": "speech", "prompt_ids": ids[0]}],
              "free-unseen": [{"prompt_id": "b", "kind": "dialogue", "prompt_ids": ids[1]},
                              {"prompt_id": "c", "kind": "thank_you", "prompt_ids": ids[2]}]}
    cfg = CurveConfig(max_new_tokens=16, draft_len=4)
    got = group_aal(drafter, target, groups, cfg)
    assert set(got["aal"]) == {"free-seen", "free-unseen", "free"}
    assert set(got["aal_kind"]) == {"speech", "dialogue", "thank_you"}
    assert got["aal_kind"]["speech"] == got["aal"]["free-seen"]
    assert min(got["aal"].values()) <= got["aal"]["free"] <= max(got["aal"].values())
    torch.manual_seed(0)
    head = FeatureHead.from_target(target, window=8)
    feat = group_aal(drafter, target, groups, cfg, lambda p: FeatureDraftSession(drafter, p, head))
    assert feat["aal"]["free"] < got["aal"]["free"]  # an untrained head drafts worse than the distilled drafter


def test_the_card_tabulates_aal_per_kind_for_each_drafter(tmp_path):
    groups = {"question-unseen": {"n": 2, "kinds": ["author", "currency"]},
              "free-unseen": {"n": 1, "kinds": ["dialogue"]}}
    col = {"aal": {"question-unseen": 0.9, "free-unseen": 0.4}, "aal_kind": {"author": 1.1, "currency": 0.7,
                                                                              "dialogue": 0.4}}
    kinds = {"config": {"draft_len": 8, "max_new_tokens": 64, "per_group": 2, "out": "k.json"}, "groups": groups,
             "points": [{"tokens": 437_000, "step": 1209, **col}], "built": {"drafter": "d", **col},
             "feature_head": {"head": "h", "aal": {"question-unseen": 1.5, "free-unseen": 1.0},
                              "aal_kind": {"author": 2.0, "currency": 1.0, "dialogue": 1.0}}}
    path = tmp_path / "kinds.json"
    path.write_text(json.dumps(kinds))
    text = smollm2_card._per_kind([str(path)])
    assert "| group | kind | built drafter (`d`) | step 1209 (437,000 tokens) | feature head (`h`) |" in text
    assert "| questions, unseen kinds | author | 1.1 | 1.1 | 2.0 |" in text
    assert text.index("| author |") < text.index("| currency |") < text.index("| dialogue |")  # questions first
    assert "| **free form, unseen kinds** | all | **0.4** | **0.4** | **1.0** |" in text
    assert "No per-kind" in smollm2_card._per_kind([str(tmp_path / "none.json")])
    feat = {k: kinds[k] for k in ("config", "groups", "feature_head")} | {"points": []}
    kinds.pop("feature_head")
    (tmp_path / "feat.json").write_text(json.dumps(feat))
    path.write_text(json.dumps(kinds))
    assert smollm2_card._per_kind([str(path), str(tmp_path / "feat.json")]) == text  # two JSONs, the same columns
    (tmp_path / "feat.json").write_text(json.dumps(feat | {"groups": {}}))
    with pytest.raises(ValueError, match="different prompt samples"):
        smollm2_card._per_kind([str(path), str(tmp_path / "feat.json")])
    trained = feat | {"feature_head": feat["feature_head"] | {"steps": 3000, "pool_positions": 134_814}}
    (tmp_path / "feat.json").write_text(json.dumps(trained))
    assert "| feature head (3,000 steps, 134,814 positions) |" in smollm2_card._per_kind([str(tmp_path / "feat.json")])


def test_the_card_fails_on_a_named_per_kind_file_that_is_not_there(tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text("{}")
    with pytest.raises(FileNotFoundError, match="--kinds: no per-kind JSON at .*nowhere.json"):
        smollm2_card.main(["--bench", str(bench), "--kinds", str(tmp_path / "nowhere.json"),
                           "--card", str(tmp_path / "card.md")])
    assert not (tmp_path / "card.md").exists()


def test_the_figure_goes_beside_the_json_unless_named_so_a_measurement_leaves_the_shipped_one_alone():
    assert plot_path(CurveConfig()) == "results/smollm2/drafter_curve.png"
    assert plot_path(CurveConfig(out="runs/x/kinds.json")) == "runs/x/kinds.png"
    assert plot_path(CurveConfig(out="runs/x/kinds.json", plot="")) == ""
    assert plot_path(CurveConfig(out="runs/x/kinds.json", plot="fig.png")) == "fig.png"
