"""The per-round record: DataFrame and CSV round trips, older column names, rows of an in-process run."""
from __future__ import annotations

import ast
import math
from pathlib import Path

import pandas as pd
import pytest

from wisv.decoding.speculative import RoundRecord, SpecOutput, spec_rows
from wisv.records.rows import RECORD_FIELDS, RoundRow, from_frame, read_records, to_frame

ROOT = Path(__file__).resolve().parents[3]


def _ue_row(i: int) -> RoundRow:
    return RoundRow(prompt_id="007", ue_id="ue1", round=i, protocol="sh", drafted=8, accepted=3 + i, mismatches=2,
                    queried=2, exchanges=2, uplink_bytes=120, downlink_bytes=96, t_draft_s=0.01, t_comm_s=0.02,
                    t_verify_s=0.03, t_head_s=0.001, t_round_s=0.07, wdt_tokens=5 - i, rtt_ms=20.0,
                    rate_up_mbps=None, per=0.0, est_rtt_ms=21.5, committed=4 + i, prefix_len=10 + 4 * i)


def test_rows_round_trip_through_a_dataframe_and_csv(tmp_path):
    rows = [_ue_row(0), _ue_row(1), RoundRow(prompt_id="8", round=0, drafted=4, accepted=4, violated=True)]
    df = to_frame(rows)
    assert list(df.columns) == list(RECORD_FIELDS)
    assert from_frame(df) == rows
    df.to_csv(tmp_path / "rounds.csv", index=False)
    back = from_frame(read_records(tmp_path / "rounds.csv"))
    assert back == rows  # prompt ids stay text ("007"), unknown fields come back None
    assert back[0].prompt_id == "007" and back[2].queried is None and back[0].rate_up_mbps is None


def test_every_field_has_a_comment_and_the_core_fields_are_required():
    src = (ROOT / "wisv" / "records" / "rows.py").read_text().splitlines()
    body = [ln for ln in src if ln.startswith("    ") and ":" in ln and not ln.strip().startswith(('"', "#"))]
    fields = [ln for ln in body if ln.split(":")[0].strip() in RECORD_FIELDS]
    assert len(fields) == len(RECORD_FIELDS) and all("  # " in ln for ln in fields)
    with pytest.raises(TypeError):
        RoundRow(prompt_id="p", round=0, drafted=4)  # accepted is required


def test_older_files_are_read_with_the_current_names(tmp_path):
    pd.DataFrame({"prompt_id": ["p0"], "ue": ["ue0"], "round": [0], "draft_len": [4], "accepted": [2]}).to_csv(
        tmp_path / "old.csv", index=False)
    df = read_records(tmp_path / "old.csv")
    assert {"drafted", "ue_id"} <= set(df) and not {"draft_len", "ue"} & set(df)
    [row] = from_frame(df)
    assert (row.drafted, row.ue_id, row.accepted, row.t_comm_s) == (4, "ue0", 2, None)


def test_missing_or_empty_files_read_as_empty(tmp_path):
    (tmp_path / "empty.csv").write_text("\n")
    assert read_records(tmp_path / "nothing.csv").empty and read_records(tmp_path / "empty.csv").empty
    to_frame([]).to_csv(tmp_path / "header.csv", index=False)
    assert read_records(tmp_path / "header.csv").empty and from_frame(to_frame([])) == []


def test_spec_rows_track_the_prefix_and_the_prompt():
    def rec(i, drafted, accepted, mism, committed):
        return RoundRecord(i, drafted, accepted, mism, 0, [0] * drafted, [0] * (drafted + 1), [0] * committed)
    out = SpecOutput([0] * 7, [rec(0, 4, 2, [2, 3], 3), rec(1, 4, 3, [], 4)])
    rows = spec_rows(out, "p0", prompt_len=10, correct=True)
    assert [(r.round, r.prefix_len, r.mismatches, r.committed) for r in rows] == [(0, 10, 2, 3), (1, 13, 0, 4)]
    assert all(r.n_tokens == 7 and r.correct and r.t_comm_s is None for r in rows)
    assert out.aal == pytest.approx(2.5) and math.isnan(SpecOutput([], []).aal)


@pytest.mark.parametrize("module", ["wisv/records/rows.py", "wisv/records/summary.py"])
def test_record_modules_import_no_torch(module):
    """Pure modules: torch appears only under TYPE_CHECKING (wisv/__init__ decides whether importing wisv loads it)."""
    tree = ast.parse((ROOT / module).read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = [a.name for n in top for a in n.names] + [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
    assert not [m for m in names if m.split(".")[0] in ("torch", "transformers") or m == "wisv.decoding.speculative"]
