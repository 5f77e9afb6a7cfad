"""scripts/cards/smollm2_card.py: a prompt set's section lists every method the benchmark timed, the confidence
stop too."""
from __future__ import annotations

from scripts.cards import smollm2_card


def test_a_sets_section_has_the_confidence_stop_beside_the_peers_defaults():
    row = {"aal": 0.9, "rounds": 10, "speedup": 0.53, "matches_target": 1.0}
    sd = {"tokens": 100, "target_only_tok_per_s": 16.0, "head_coverage": 0.98, "by_k": {"8": row},
          "peer": {"8": {"target_calls": 10, "speedup": 0.54, "matches_target": 1.0, "ours_vs_peer": 0.98},
                   "defaults": {"target_calls": 11, "speedup": 0.75, "matches_target": 1.0}},
          "confidence_stop": {"0.4": row | {"aal": 0.8, "speedup": 0.72, "k": 8, "ours_vs_peer_defaults": 0.96}}}
    text = smollm2_card._set_section("s", sd | {"feature_head_stop": {"0.4": row | {"k": 8}}}, {})
    assert "| ours with the feature head and the confidence stop at 0.4, K<=8 | 0.9 | 10 | 0.53 | – | 100% |" in text
    assert "| ours with the peer's confidence stop at 0.4, K<=8 | 0.8 | 10 | 0.72 | – | 100% |" in text
    assert "same K): K=8: 0.98; with the confidence stop at 0.4 against the peer's defaults: 0.96." in text
    assert "confidence stop" not in smollm2_card._set_section("s", {k: v for k, v in sd.items()
                                                                    if k != "confidence_stop"}, {})
    change = {"change_pct": -4.42, "ci_low_pct": -6.0, "ci_high_pct": -2.5, "faster": 12, "slower": 2}
    padded = smollm2_card._set_section("s", sd | {"padded_stop": {"0.4": row | {
        "k": 8, "feature_head": True, "speedup": 0.6, "vs_unpadded": change}}}, {})
    assert ("| the same with the feature head, confidence stop at 0.4, passes padded (`--pass-rows`; -4.4% time "
            "[-6.0, -2.5] paired) | 0.9 | 10 | 0.6 | – | 100% |") in padded


def test_the_profile_section_splits_our_loop_and_the_peer_when_the_benchmark_did():
    m = {"wall_s": 10.0, "rest_s": 0.5, "drafter_calls": 700, "drafter_s": 4.0, "drafter_ms_per_call": 5.714,
         "target_calls": 100, "target_s": 5.5, "target_ms_per_call": 55.0}
    prof = {"k": 8, "prompts": 3, "wall_s": 11.0, "calls": 1000,
            "top_by_own_time": [{"function": "~:0:linear", "calls": 5, "own_s": 1.0, "cum_s": 1.0}]}
    text = smollm2_card._profile(prof | {"split": {"ours": m, "peer": m | {"rest_s": 0.7}}})
    assert "| ours | 10.0 | 700 x 5.714 ms = 4.0 | 100 x 55.0 ms = 5.5 | 0.5 |" in text
    assert "| peer | 10.0 | 700 x 5.714 ms = 4.0 | 100 x 55.0 ms = 5.5 | 0.7 |" in text
    assert "drafter forward calls" not in smollm2_card._profile(prof) and "| `~:0:linear` | 5 |" in text


def test_a_bench_with_the_same_forward_baseline_shows_it_beside_generate():
    row = {"aal": 0.9, "rounds": 10, "speedup": 1.04, "speedup_same_forward": 0.93, "matches_target": 1.0}
    sd = {"tokens": 100, "target_only_tok_per_s": 16.0, "head_coverage": 0.98, "by_k": {"8": row},
          "peer": {"8": {"target_calls": 10, "speedup": 0.95, "matches_target": 1.0, "ours_vs_peer": 1.09}},
          "target_only_same_forward_s": 5.6, "same_forward_vs_generate": 1.12, "same_forward_matches_target": 1.0}
    text = smollm2_card._set_section("s", sd, {})
    assert "| ours, K=8 | 0.9 | 10 | 1.04 | 0.93 | 100% |" in text
    assert "| transformers assisted, K=8 | | 10 target calls | 0.95 | – | 100% |" in text
    assert "through our own forward (`target_greedy`) it runs 1.12x as fast, 100% the same tokens" in text


def test_the_card_says_how_loaded_the_machine_was_where_the_bench_recorded_it():
    assert "load average 1.02 at the start and 1.31 at the end" in smollm2_card._load(
        {"load_avg_1min": {"start": 1.02, "end": 1.31}})
    assert "may have been shared" in smollm2_card._load({})


def test_the_card_names_the_drafter_s_weights_and_old_benches_read_float32():
    text = smollm2_card._dtype({"drafter": {"dtype": "float16"}})
    assert text.startswith("Drafter weights float16 (`--drafter-dtype float16`")
    assert smollm2_card._dtype({"drafter": {}}) == "Drafter weights float32, target float32."
