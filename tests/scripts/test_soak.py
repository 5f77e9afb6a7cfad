"""soak: the RSS growth and stuck-session arithmetic, and a few seconds of 2 UEs against a real batching edge."""
import json

import pytest

from scripts.bench.soak import Cycle, SoakConfig, report, rss_growth, run, stuck_sessions


def test_rss_growth_is_measured_after_the_warm_up():
    rss = [100.0, 200.0, 300.0, 202.0, 204.0, 206.0, 210.0, 212.0, 214.0]  # the warm-up, a transient, then a leak
    samples = [{"t_s": 5.0 * i, "rss_mb": r} for i, r in enumerate(rss)]
    got = rss_growth(samples, 5.0)  # 8 samples after the warm-up: quarters of 2
    assert got == {"baseline_mb": 250.0, "final_mb": 213.0, "max_mb": 300.0, "growth": pytest.approx(213 / 250 - 1),
                   "max_growth": pytest.approx(0.2)}
    got = rss_growth(samples, 15.0)
    assert (got["baseline_mb"], got["final_mb"]) == (202.0, 214.0) and got["growth"] == pytest.approx(12 / 202)
    assert rss_growth(samples, 60.0)["growth"] is None  # no sample after the warm-up: nothing measured


def test_stuck_sessions_waited_longer_than_the_threshold():
    assert stuck_sessions({"a": 0.0, "b": 8.0, "c": 9.5}, now=10.0, stuck_s=1.5) == {"a": 10.0, "b": 2.0}


def test_a_cycle_goes_round_from_its_start():
    c = Cycle(["p0", "p1", "p2"], start=1)
    assert [c[i] for i in range(4)] == ["p1", "p2", "p0", "p1"] and len(c) > 10**9


@pytest.mark.slow
def test_two_ues_for_a_few_seconds(tmp_path):
    out = tmp_path / "soak.json"
    doc = run(SoakConfig(ues=2, duration_s=4.0, warmup_s=1.0, sample_s=0.5, prompts=2, max_new_tokens=16,
                         out=str(out)))
    assert json.loads(out.read_text())["rounds"] == doc["rounds"] > 0
    assert (tmp_path / "soak_config.toml").is_file()
    assert doc["errors"] == 0 and doc["stuck"] == {} and doc["edge_alive"] and doc["prompts"] > 2
    assert len(doc["samples"]) >= 6 and all(s["rss_mb"] > 0 for s in doc["samples"])
    assert doc["rss"]["growth"] is not None and ("PASS" if doc["passed"] else "FAIL") in report(doc)
