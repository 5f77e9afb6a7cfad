"""scripts/bench/smollm2_drafter.py's measuring functions on the built-in toy pair: every method lossless, the
feature head timed beside the drafter, and the profile of our loop."""
from __future__ import annotations

import pytest
import torch

from scripts.bench.smollm2_drafter import DrafterBenchConfig, profile_loop, sd_runs
from wisv.decoding.featdraft import FeatureHead
from wisv.models.loader import load_pair
from wisv.tasks.prompts import prompt_rows


@pytest.mark.slow
def test_sd_runs_times_every_method_and_the_feature_head_losslessly():
    torch.set_num_threads(1)
    pair = load_pair()
    rows = prompt_rows(pair.tokenizer, "test", 2)
    cfg = DrafterBenchConfig(draft_lens=[2, 4], peer_draft_lens=[4], peer_defaults=False, max_new_tokens=12)
    torch.manual_seed(0)
    head = FeatureHead.from_target(pair.target, window=8)
    got = sd_runs(pair, rows, cfg, None, head)
    assert set(got["by_k"]) == {"2", "4"} and set(got["peer"]) == {"4"}
    assert all(v["matches_target"] == 1.0 for v in [*got["by_k"].values(), *got["peer"].values()])
    assert got["same_forward_matches_target"] == 1.0 and got["target_only_same_forward_s"] > 0  # the fair base
    assert all(v["speedup_same_forward"] > 0 for v in got["by_k"].values())
    fh = got["feature_head"]
    assert fh["k"] == 4 and fh["matches_target"] == 1.0 and fh["rounds"] > 0 and fh["speedup"] > 0
    assert "feature_head" not in sd_runs(pair, rows[:1], cfg, None) and "confidence_stop" not in got
    stopped = sd_runs(pair, rows[:1], DrafterBenchConfig(draft_lens=[4], peer_draft_lens=[], stop_below=[0.4, 1.0],
                                                         max_new_tokens=12), None)
    cs = stopped["confidence_stop"]
    assert set(cs) == {"0.4", "1.0"} and all(v["matches_target"] == 1.0 and v["k"] == 4 for v in cs.values())
    assert cs["1.0"]["rounds"] >= cs["0.4"]["rounds"] and cs["1.0"]["ours_vs_peer_defaults"] > 0
    assert "feature_head_stop" not in stopped and "padded_stop" not in stopped  # no head, no plan: no such rows
    padded = sd_runs(pair, rows[:1], DrafterBenchConfig(draft_lens=[4], peer_draft_lens=[], peer_defaults=False,
                                                        stop_below=[0.4], max_new_tokens=12), None, None,
                     {2: 5, 3: 5, 4: 5})
    ps = padded["padded_stop"]["0.4"]  # the same drafts with padded passes: the same rounds and tokens
    assert ps["matches_target"] == 1.0 and ps["rounds"] == padded["confidence_stop"]["0.4"]["rounds"]
    assert ps["aal"] == padded["confidence_stop"]["0.4"]["aal"] and ps["feature_head"] is False
    assert len(ps["prompt_s"]) == 1 and ps["vs_unpadded"]["faster"] + ps["vs_unpadded"]["slower"] <= 1
    vs = ps["vs_target_only"]
    assert vs["ci_low_pct"] <= vs["change_pct"] <= vs["ci_high_pct"]
    both = sd_runs(pair, rows[:1], DrafterBenchConfig(draft_lens=[4], peer_draft_lens=[], peer_defaults=False,
                                                      stop_below=[1.0], max_new_tokens=12), None, head)
    hs = both["feature_head_stop"]["1.0"]
    assert hs["matches_target"] == 1.0 and hs["rounds"] >= both["feature_head"]["rounds"] and hs["k"] == 4
    assert "feature_head_recompute" not in both
    again = sd_runs(pair, rows[:1], DrafterBenchConfig(draft_lens=[4], peer_draft_lens=[], peer_defaults=False,
                                                       head_recompute=True, max_new_tokens=12), None, head)
    rc = again["feature_head_recompute"]  # the window re-read every block: the same drafts, the same rounds
    assert rc["matches_target"] == 1.0 and rc["rounds"] == again["feature_head"]["rounds"]
    assert rc["aal"] == again["feature_head"]["aal"]


def test_the_profile_names_the_loop_functions():
    torch.set_num_threads(1)
    pair = load_pair()
    rows = prompt_rows(pair.tokenizer, "test", 1)
    prof = profile_loop(pair, rows, DrafterBenchConfig(draft_lens=[4], max_new_tokens=8), top=40)
    assert prof["prompts"] == 1 and prof["k"] == 4 and prof["calls"] > 0 and prof["wall_s"] > 0
    names = [f["function"] for f in prof["top_by_own_time"]]
    assert len(names) == 40 and all(f["own_s"] >= 0 and f["calls"] > 0 for f in prof["top_by_own_time"])
    assert any("linear" in n for n in names)
    ours, peer = prof["split"]["ours"], prof["split"]["peer"]
    for m in (ours, peer):
        assert m["drafter_s"] > 0 and m["target_s"] > 0 and m["rest_s"] > -2e-3
        assert abs(m["wall_s"] - m["drafter_s"] - m["target_s"] - m["rest_s"]) < 2e-3
    # the same rounds, and the prompt rides with the first verification in both: as many target calls
    assert ours["target_calls"] == peer["target_calls"] > 0 and ours["drafter_calls"] == peer["drafter_calls"]
