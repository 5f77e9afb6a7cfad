"""bench_sibling: the summary's arithmetic and one interleaved round on a tiny pair."""
from __future__ import annotations

import pytest

from scripts.bench.sibling import round_times, summary
from tests.tiny_pair import make_pair
from wisv.decoding.sessions import DraftSession, VerifySession


def test_summary_per_round_and_per_mismatch_round():
    rounds = [{"plain_s": 0.010, "sibling_s": 0.010, "mismatches": 0},
              {"plain_s": 0.010, "sibling_s": 0.016, "mismatches": 2},
              {"plain_s": 0.012, "sibling_s": 0.016, "mismatches": 1}]
    s = summary(rounds)
    assert (s["rounds"], s["mismatch_rounds"], s["mismatches_per_mismatch_round"]) == (3, 2, 1.5)
    assert s["all_rounds"]["overhead_ms_mean"] == pytest.approx(10 / 3)
    assert s["mismatch_rounds_only"]["plain_ms"]["mean"] == pytest.approx(11.0)
    assert s["mismatch_rounds_only"]["overhead_frac_mean"] == pytest.approx(5 / 11)
    assert summary([])["all_rounds"] == {}


def test_one_round_keeps_both_sessions_on_the_same_path():
    drafter, target = make_pair("llama", 32, 2, 4, 2)
    prompt = [3, 7, 11]
    d, a, b = DraftSession(drafter, prompt), VerifySession(target, prompt), VerifySession(target, prompt)
    for i in range(4):
        draft = d.draft(6).tokens
        s_plain, s_sib, m, committed = round_times(a, b, draft, i % 2 == 1)
        d.commit(committed)
        assert s_plain > 0 and s_sib > 0 and 0 <= m <= len(draft)
        assert a.seq == b.seq and a.cached_len == b.cached_len == len(a.seq) - 1
