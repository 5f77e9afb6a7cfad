"""Collect over two worker processes gives the same episodes and mismatches as one process."""
import numpy as np

from labeling.collect import collect_parallel, collect_rows
from labeling.config import CollectConfig
from wisv.models.loader import load_pair
from wisv.tasks.prompts import prompt_rows


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
