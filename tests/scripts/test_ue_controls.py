"""UE-controls benchmark: the predictor and proactive-drafting checks on hand-made run summaries."""
import pytest

from scripts.bench.ue_controls import parse_args, per_token_s, predictor_check, proactive_check


def S(wdt=2.0, tput=100.0, latency=1.0, prompts=4, tokens=400, match=1.0):
    return {"wdt_tokens_per_round": wdt, "throughput_tok_s": tput, "latency_s": latency, "prompts": prompts,
            "generated_tokens": tokens, "matches_target": match}


def test_predictor_needs_a_quarter_less_wdt_at_no_less_goodput():
    assert predictor_check([S(wdt=4.0)], [S(wdt=3.0)])["pass"]  # exactly -25%
    assert not predictor_check([S(wdt=4.0)], [S(wdt=3.2)])["pass"]
    assert not predictor_check([S(wdt=4.0, tput=100)], [S(wdt=1.0, tput=99)])["pass"]
    assert predictor_check([S(wdt=4.0)], [S(wdt=1.0)])["wdt_cut"] == pytest.approx(0.75)


def test_predictor_checks_the_medians_of_repeated_pairs():
    off = [S(wdt=4.0, tput=t) for t in (100, 120, 90)]
    on = [S(wdt=1.0, tput=t) for t in (110, 95, 105)]  # one pair lower, the median higher: 105 >= 100
    c = predictor_check(off, on)
    assert c["pass"] and (c["goodput_off"], c["goodput_on"]) == (100, 105) and c["goodput_on_runs"] == [110, 95, 105]
    lower = predictor_check(off, [S(wdt=1.0, tput=t) for t in (130, 95, 99)])  # median 99 < 100
    assert not lower["pass"] and not lower["goodput_higher"]
    assert lower["goodput_noise_tok_s"] == 15  # reported: half the off runs' range, (120 - 90) / 2


def test_proactive_needs_lower_latency_per_token_and_greedy_output():
    assert per_token_s(S(latency=1.0, prompts=4, tokens=400)) == pytest.approx(0.01)
    c = proactive_check([S(latency=1.0)], [S(latency=0.9)], 20.0)
    assert c["pass"] and c["speedup"] == pytest.approx(1 / 0.9) and c["per_token_ms_on"] == pytest.approx(9.0)
    assert not proactive_check([S(latency=1.0)], [S(latency=0.9, match=0.95)], 20.0)["pass"]
    assert not proactive_check([S(latency=1.0)], [S(latency=1.0)], 50.0)["pass"]
    # medians of three pairs; one repeat that is not greedy fails the whole check
    c = proactive_check([S(latency=x) for x in (1.0, 1.2, 0.8)], [S(latency=x) for x in (0.9, 0.95, 1.1)], 20.0)
    assert c["pass"] and c["per_token_ms_on"] == pytest.approx(9.5)
    assert not proactive_check([S(latency=1.0)] * 2, [S(latency=0.9), S(latency=0.9, match=None)], 20.0)["pass"]


def test_parse_args_needs_a_trained_predictor(tmp_path):
    with pytest.raises(SystemExit):
        parse_args(["--predictor", str(tmp_path / "none.safetensors")])
    assert parse_args(["--rtts-ms", "20,50"]).rtts_ms == [20.0, 50.0]
    with pytest.raises(SystemExit):  # the config's ValueError, as a usage error
        parse_args(["--repeats", "0"])
