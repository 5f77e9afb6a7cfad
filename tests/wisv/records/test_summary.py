"""The one summary of round records: AAL, rounds per prompt, latency, throughput and WDT by hand."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from wisv.records.rows import RoundRow, to_frame
from wisv.records.summary import SPEC_DECODE_NAMES, spec_decode_metrics, summarize_rounds


def _rounds() -> pd.DataFrame:
    # prompt a: 3 rounds accepting 4, 2, 0 of 4; prompt b: 1 round accepting 3 of 3
    spec = [("a", 0, 4, 4), ("a", 1, 4, 2), ("a", 2, 4, 0), ("b", 0, 3, 3)]
    return to_frame(RoundRow(prompt_id=p, round=i, drafted=k, accepted=acc, wdt_tokens=k - acc)
                    for p, i, k, acc in spec)


def test_summary_by_hand():
    prompts = pd.DataFrame({"latency_s": [0.6, 0.2], "n_tokens": [9, 4]})
    s = summarize_rounds(_rounds(), prompts)
    assert s["aal"] == pytest.approx((4 + 2 + 0 + 3) / 4)  # accepted draft tokens per round
    assert s["rounds_per_prompt"] == 2.0  # 4 rounds over 2 prompts
    assert s["latency_s"] == pytest.approx(0.4)  # mean per prompt
    assert s["throughput_tok_s"] == pytest.approx(13 / 0.8)  # generated tokens over the prompts' total time
    assert s["wdt_tokens_per_round"] == pytest.approx((0 + 2 + 4 + 0) / 4)


def test_what_is_not_known_is_nan():
    s = summarize_rounds(_rounds().drop(columns="wdt_tokens"))  # no per-prompt data
    assert s["aal"] == pytest.approx(9 / 4)
    assert all(math.isnan(s[k]) for k in ("rounds_per_prompt", "latency_s", "throughput_tok_s", "wdt_tokens_per_round"))
    empty = summarize_rounds(pd.DataFrame(), pd.DataFrame(columns=["latency_s", "n_tokens"]))
    assert math.isnan(empty["aal"]) and empty["rounds_per_prompt"] == 0.0 and math.isnan(empty["throughput_tok_s"])
    tokens_only = summarize_rounds(_rounds(), pd.DataFrame({"n_tokens": [9, 4]}))
    assert tokens_only["rounds_per_prompt"] == 2.0 and math.isnan(tokens_only["latency_s"])


def _steps(*spec: tuple) -> pd.DataFrame:
    """Rounds of one prompt from (drafted, accepted[, tree_depth]) per round."""
    return to_frame(RoundRow(prompt_id="a", round=i, drafted=s[0], accepted=s[1],
                             tree_depth=s[2] if len(s) > 2 else None) for i, s in enumerate(spec))


@pytest.mark.parametrize("rounds, expect", [
    # chain, K=4: steps accepting 4, 2, 0, 4 -> histogram [1, 0, 1, 0, 2]
    (_steps((4, 4), (4, 2), (4, 0), (4, 4)),
     dict(mean_acceptance_length=1 + 10 / 4, draft_acceptance_rate=10 / 16, acceptance_histogram=[1, 0, 1, 0, 2],
          num_spec_steps=4, num_accepted_draft_tokens=10, num_draft_tokens=16, num_spec_tokens=4)),
    # the last block cut to 2 by the budget: K is still the longest block drafted
    (_steps((3, 1), (2, 2)),
     dict(mean_acceptance_length=2.5, draft_acceptance_rate=3 / 5, acceptance_histogram=[0, 1, 1, 0],
          num_spec_steps=2, num_accepted_draft_tokens=3, num_draft_tokens=5, num_spec_tokens=3)),
    # trees: 6 and 5 nodes uploaded, depths 3 and 4; the accepted path's depth is what a step accepted
    (_steps((6, 2, 3), (5, 4, 4)),
     dict(mean_acceptance_length=4.0, draft_acceptance_rate=6 / 11, acceptance_histogram=[0, 0, 1, 0, 1],
          num_spec_steps=2, num_accepted_draft_tokens=6, num_draft_tokens=11, num_spec_tokens=4)),
    # a round that drafted nothing is no spec step (vLLM counts none)
    (_steps((0, 0), (2, 1)),
     dict(mean_acceptance_length=2.0, draft_acceptance_rate=0.5, acceptance_histogram=[0, 1, 0],
          num_spec_steps=1, num_accepted_draft_tokens=1, num_draft_tokens=2, num_spec_tokens=2)),
])
def test_vllm_names_by_hand(rounds: pd.DataFrame, expect: dict) -> None:
    m = spec_decode_metrics(rounds)
    assert list(m) == list(SPEC_DECODE_NAMES)
    assert m["acceptance_histogram"] == expect["acceptance_histogram"]
    scalars = [k for k in SPEC_DECODE_NAMES if k != "acceptance_histogram"]
    assert [m[k] for k in scalars] == pytest.approx([expect[k] for k in scalars])
    s = summarize_rounds(rounds)  # the summary carries them as they are
    assert {k: s[k] for k in SPEC_DECODE_NAMES} == spec_decode_metrics(rounds)


def test_vllm_names_against_aal() -> None:
    rounds = _rounds()  # every round drafted: mean_acceptance_length = 1 + aal, exactly
    s = summarize_rounds(rounds)
    assert s["mean_acceptance_length"] == pytest.approx(1 + s["aal"])
    assert s["num_spec_steps"] == len(rounds) and sum(s["acceptance_histogram"]) == len(rounds)
    assert sum(j * h for j, h in enumerate(s["acceptance_histogram"])) == rounds["accepted"].sum()


def test_vllm_names_without_rounds() -> None:
    for rounds in (pd.DataFrame(), pd.DataFrame({"accepted": [1, 2]})):  # none, or another producer's columns
        m = spec_decode_metrics(rounds)
        assert math.isnan(m["mean_acceptance_length"]) and math.isnan(m["draft_acceptance_rate"])
        assert m["acceptance_histogram"] is None and m["num_spec_steps"] is None
    zero = spec_decode_metrics(_steps((0, 0)))  # rounds, but no step drafted
    assert zero["num_spec_steps"] == 0 and zero["acceptance_histogram"] == [0]
    assert math.isnan(zero["mean_acceptance_length"]) and math.isnan(zero["draft_acceptance_rate"])


def test_the_edges_extension_is_part_of_a_step_and_a_hand_over_is_none():
    from wisv.records.fieldmetrics import mean_accepted_tokens, per_position_acceptance
    # a: the UE's 4 all accepted, then 2 of the edge's 3; b: 1 of the UE's 4, the edge's 3 not reached;
    # c: the UE drafted nothing (prompt lookup without a match), the edge 2, both accepted; d: a hand-over
    rows = [RoundRow(prompt_id="a", round=0, drafted=4, accepted=6, edge_drafted=3, edge_accepted=2),
            RoundRow(prompt_id="b", round=0, drafted=4, accepted=1, edge_drafted=3, edge_accepted=0),
            RoundRow(prompt_id="c", round=0, drafted=0, accepted=2, edge_drafted=2, edge_accepted=2),
            RoundRow(prompt_id="d", round=0, drafted=0, accepted=0, edge_drafted=9, edge_accepted=5, edge_alone=True),
            RoundRow(prompt_id="e", round=0, drafted=4, accepted=3)]
    m = spec_decode_metrics(to_frame(rows))
    assert m["num_spec_steps"] == 4 and m["num_draft_tokens"] == 7 + 7 + 2 + 4
    assert m["num_accepted_draft_tokens"] == 6 + 1 + 2 + 3 and m["num_spec_tokens"] == 7
    assert m["acceptance_histogram"] == [0, 1, 1, 1, 0, 0, 1, 0]
    assert m["draft_acceptance_rate"] <= 1 and mean_accepted_tokens(to_frame(rows)) == pytest.approx(1 + 12 / 4)
    pos = per_position_acceptance(to_frame(rows))
    assert pos["reached"].tolist() == [4, 4, 3, 3, 2, 2, 2] and pos["accepted"].tolist() == [4, 3, 2, 1, 1, 1, 0]
