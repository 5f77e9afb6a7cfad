"""labeling anatomy: where labelled flips fall (first sentence or after, guarded or not), on a synthetic run."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from labeling.anatomy import first_sentence_done, flip_table, place_of, run_rows
from labeling.risk import flip_upper_bound
from wisv.head.features import SCALARS
from wisv.head.guard import GuardConfig

WORDS = {1: "Paris", 2: " is the capital", 3: ".", 4: " It", 5: " is old", 6: "\n"}


@pytest.mark.parametrize("prefix, done", [("", False), ("Paris is", False), ("Paris is the capital.", True),
                                          ("Paris is the capital. It", True), ("3.5 is", False),
                                          ("1. First", True), ("A list:\n- x", True), ("  Yes!", True)])
def test_the_first_sentence_is_done_after_a_sentence_end(prefix, done):
    assert first_sentence_done(prefix) is done
    assert place_of(prefix) == ("after" if done else "first sentence")


def test_the_table_counts_checkable_flips_and_bounds_each_cell():
    rows = pd.DataFrame({"part": ["dev"] * 5, "place": ["after"] * 3 + ["first sentence"] * 2,
                         "checkable": [True, True, True, True, False], "turns_wrong": [0, 1, 0, 1, 1],
                         "turns_right": [1, 0, 0, 0, 0]})
    t = flip_table(rows, ["part", "place"], 0.1).set_index("place")
    assert t.loc["after", ["n", "flips", "gains"]].tolist() == [3, 1, 1]
    assert t.loc["first sentence", ["n", "flips", "gains"]].tolist() == [1, 1, 0]  # the free-form row is left out
    assert t.loc["after", "flip_bound"] == pytest.approx(flip_upper_bound(1, 3, 0.1))
    assert t.loc["first sentence", "flip_bound"] == 1.0


def test_run_rows_places_each_mismatch_and_applies_the_guard(tmp_path):
    from labeling.config import AnatomyConfig
    from labeling.store import save_config
    out = [1, 2, 3, 4, 5, 3]  # "Paris is the capital. It is old."
    positions = [1, 2, 5]  # in the first sentence (twice), after it
    edge = np.zeros((3, len(SCALARS) - 1), np.float32)
    edge[:, SCALARS.index("top1")] = [0.5, 0.95, 0.5]  # the second: a sure target, guarded
    np.savez_compressed(tmp_path / "traces.npz", episode=np.zeros(3, int), position=np.array(positions),
                        draft_id=np.array([7, 8, 9]), target_id=np.array([1, 2, 3]), edge=edge)
    pd.DataFrame({"row": [0, 1, 2], "episode": 0, "position": positions, "draft_id": [7, 8, 9],
                  "turns_wrong": [1, 0, 0], "turns_right": [0, 0, 1]}).to_csv(tmp_path / "labels.csv", index=False)
    (tmp_path / "episodes.jsonl").write_text(json.dumps({"episode": 0, "answer": ["Paris"], "kind": "capital",
                                                         "form": "first", "output_ids": out}) + "\n")
    save_config(tmp_path, "collect", AnatomyConfig())
    rows = run_rows(str(tmp_path), ("capital",), GuardConfig(top1_min=0.9, nll_margin_min_nats=4.0),
                    lambda ids: "".join(WORDS[i] for i in ids))
    assert rows["place"].tolist() == ["first sentence", "first sentence", "after"]
    assert rows["guarded"].tolist() == [False, True, False]
    assert set(rows["part"]) == {"dev"} and rows["checkable"].all()
    assert rows["turns_wrong"].tolist() == [1, 0, 0] and rows["turns_right"].tolist() == [0, 0, 1]
