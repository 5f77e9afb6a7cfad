"""Collect over two worker processes gives the same episodes and mismatches as one process."""
import numpy as np
import pytest

from labeling.collect import collect_parallel, collect_rows
from labeling.config import CollectConfig
from wisv.models.loader import load_pair
from wisv.tasks.prompts import prompt_rows


@pytest.mark.slow
def test_two_workers_equal_one_process():
    cfg = CollectConfig(prompts=5, draft_len=4, max_new_tokens=40, workers=2)
    rows = prompt_rows(load_pair().tokenizer, "calib", 5, need_answers=True)
    eps1, ms1 = collect_rows(cfg, rows)
    eps2, ms2 = collect_parallel(cfg, rows)
    assert [e["output_ids"] for e in eps1] == [e["output_ids"] for e in eps2]
    assert [e["episode"] for e in eps2] == list(range(5))
    assert len(ms1) == len(ms2) > 0
    for a, b in zip(ms1, ms2):
        assert (a["episode"], a["position"], a["draft_id"]) == (b["episode"], b["position"], b["draft_id"])
        assert np.array_equal(a["h_d"], b["h_d"]) and np.array_equal(a["h_t"], b["h_t"])


@pytest.mark.slow
def test_sibling_flag_records_the_sibling_columns_and_changes_nothing_else():
    from wisv.head.features import BASE_SCALARS, SCALARS, SIBLING_SCALARS
    rows = prompt_rows(load_pair().tokenizer, "calib", 3, need_answers=True)
    off = collect_rows(CollectConfig(prompts=3, draft_len=4, max_new_tokens=32), rows)
    on = collect_rows(CollectConfig(prompts=3, draft_len=4, max_new_tokens=32, sibling=True), rows)
    assert [e["output_ids"] for e in off[0]] == [e["output_ids"] for e in on[0]]
    assert len(off[1]) == len(on[1]) > 0
    n, sib = len(BASE_SCALARS), slice(len(BASE_SCALARS), len(BASE_SCALARS) + len(SIBLING_SCALARS))
    for a, b in zip(off[1], on[1]):
        assert np.array_equal(a["edge"][:n], b["edge"][:n])
        assert np.isnan(a["edge"][sib]).all() and not np.isnan(b["edge"][sib]).any()
        assert b["edge"][n] in (0.0, 1.0) and -1.0 <= b["edge"][n + 2] <= 1.0 + 1e-6
        assert a["edge"][SCALARS.index("out_pos")] == a["position"] == b["edge"][SCALARS.index("out_pos")]


def test_pick_rows_skips_filters_by_kind_then_takes_the_first_n():
    import pytest

    from labeling.collect import pick_rows
    rows = [{"prompt_id": str(i), "kind": "ab"[i % 2]} for i in range(10)]
    cfg = CollectConfig(prompts=2, skip_prompts=3, kinds=("b",))
    assert [r["prompt_id"] for r in pick_rows(cfg, rows)] == ["3", "5"]
    assert [r["prompt_id"] for r in pick_rows(CollectConfig(prompts=3), rows)] == ["0", "1", "2"]
    with pytest.raises(ValueError, match="no prompts left"):
        pick_rows(CollectConfig(prompts=3, kinds=("c",)), rows)
