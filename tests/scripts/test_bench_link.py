"""Tests of scripts/bench/link.py's pure helpers: the comm-time prediction, the checks and the JSON report shape."""
import json
import math

import pandas as pd
import pytest

from scripts.bench.link import (
    REJECT_POINT,
    BenchConfig,
    auto_vs_best,
    build_report,
    failures,
    fidelity_summary,
    host_overhead_from,
    parse_args,
    plan,
    predict_comm_s,
    protocol_time_s,
    reject_vs_greedy,
    sh_exchange_check,
)


def _row(up: int = 100, down: int = 50, ex: int = 1, rate: float | None = 2.0, rtt: float = 20.0,
         per: float = 0.0, **kw) -> dict:
    return {"uplink_bytes": up, "downlink_bytes": down, "exchanges": ex, "rate_up_mbps": rate,
            "rate_down_mbps": rate, "rtt_ms": rtt, "per": per} | kw


@pytest.mark.parametrize("row, expected_s", [
    (_row(), 150 * 8 / 2e6 + 0.020),  # greedy/fh: one exchange
    (_row(ex=2), 150 * 8 / 2e6 + 0.040),  # SH with a mismatch: two RTTs, bytes summed over both exchanges
    (_row(per=0.5), 150 * 8 / 1e6 + 0.020),  # expected serialization S / (R (1 - PER))
    (_row(per=0.5, per_down=0.0), 100 * 8 / 1e6 + 50 * 8 / 2e6 + 0.020),  # per direction
    (_row(per=0.5, per_down=math.nan), 150 * 8 / 1e6 + 0.020),  # missing per_down: same as per
    (_row(rate=None, rtt=5.0), 0.005),  # unlimited rate
    (_row(rate=math.inf, rtt=0.0), 0.0),
    (_row(rate=math.nan, rtt=0.0), 0.0),  # empty CSV cell
    (_row(rate=0.0, rtt=0.0), 0.0),  # 0 = unlimited, like --rate-mbps 0
])
def test_predict_comm_s(row, expected_s):
    assert predict_comm_s(row) == pytest.approx(expected_s)


def test_predict_comm_s_accepts_pandas_row():
    df = pd.DataFrame([_row(rate=20.0, rtt=5.0)])
    assert predict_comm_s(df.iloc[0]) == pytest.approx(150 * 8 / 20e6 + 0.005)


def _rounds(scale: float, n: int = 4) -> pd.DataFrame:
    rows = [_row(up=1000 * (i + 1)) for i in range(n)]
    return pd.DataFrame([r | {"t_comm_s": scale * predict_comm_s(r)} for r in rows])


@pytest.mark.parametrize("scale, ok", [(1.0, True), (1.05, True), (0.92, True), (1.2, False), (0.8, False)])
def test_fidelity_summary(scale, ok):
    rounds = _rounds(scale)
    s = fidelity_summary(rounds, tol=0.10)
    assert s["n_rounds"] == 4 and s["ratio"] == pytest.approx(scale) and s["pass"] is ok
    assert s["err_pct"] == pytest.approx(abs(scale - 1) * 100)
    excess_ms = [(scale - 1) * 1e3 * predict_comm_s(r) for _, r in rounds.iterrows()]
    assert s["excess_min_ms"] == pytest.approx(min(excess_ms))


def test_fidelity_summary_empty():
    s = fidelity_summary(pd.DataFrame(), tol=0.10)
    assert s == {"n_rounds": 0, "pass": False}


def _sh_rounds(rtt_ms: float, mismatches: list[int], exchanges: list[int]) -> pd.DataFrame:
    rows = [_row(up=200 + 10 * m, ex=e, rtt=rtt_ms, mismatches=m) for m, e in zip(mismatches, exchanges)]
    return pd.DataFrame([r | {"t_comm_s": predict_comm_s(r) + 0.0003} for r in rows])  # + fixed overhead


def test_sh_exchange_check_consistent():
    s = sh_exchange_check(_sh_rounds(20.0, [0, 2, 1, 0], [1, 2, 2, 1]), 20.0, tol=0.10)
    assert s["exchanges_ok"] and s["pass"] and s["n_two_exchange"] == 2
    assert s["extra_ms"] == pytest.approx(20.0)


def test_sh_exchange_check_flags_wrong_exchange_count():
    s = sh_exchange_check(_sh_rounds(20.0, [0, 2, 1], [1, 1, 2]), 20.0, tol=0.10)
    assert not s["exchanges_ok"] and not s["pass"]


def test_sh_exchange_check_without_mismatches_has_no_extra():
    s = sh_exchange_check(_sh_rounds(5.0, [0, 0], [1, 1]), 5.0, tol=0.10)
    assert s["extra_ms"] is None and s["pass"]


@pytest.mark.parametrize("auto, fh, sh, ok", [(1.0, 1.0, 2.0, True), (1.04, 1.0, 3.0, True), (1.2, 2.0, 1.0, False)])
def test_auto_vs_best(auto, fh, sh, ok):
    r = auto_vs_best(auto, fh, sh)
    assert r["ratio"] == pytest.approx(auto / min(fh, sh)) and r["pass"] is ok


def test_auto_vs_best_checks_the_protocol_time_when_given():
    noisy = auto_vs_best(1.08, 1.0, 1.5, {"auto": 0.201, "fh": 0.200, "sh": 0.26})  # compute noise, same link time
    assert noisy["ratio"] == pytest.approx(1.08) and noisy["link_ratio"] == pytest.approx(1.005) and noisy["pass"]
    worse = auto_vs_best(1.0, 1.0, 1.5, {"auto": 0.23, "fh": 0.200, "sh": 0.26})  # a wrong choice shows here
    assert worse["link_ratio"] == pytest.approx(1.15) and not worse["pass"]


def test_protocol_time_is_round_time_outside_the_forwards_per_prompt():
    rounds = pd.DataFrame({"prompt_id": ["a", "a", "b"], "t_round_s": [0.05, 0.04, 0.06],
                           "t_draft_s": [0.02, 0.02, 0.03], "t_verify_s": [0.01, 0.01, 0.01]})
    assert protocol_time_s(rounds) == pytest.approx((0.02 + 0.01 + 0.02) / 2)
    assert math.isnan(protocol_time_s(pd.DataFrame()))


def _summary(latency_s: float, t_comm_s: float) -> dict:
    return {"latency_s": latency_s, "t_comm_s_mean": t_comm_s}


def test_reject_vs_greedy():
    r = reject_vs_greedy(_summary(5.0, 0.06), _summary(1.0, 0.02))
    assert r["pass"] and r["ratio"] == pytest.approx(5.0) and r["comm_ratio"] == pytest.approx(3.0)
    assert not reject_vs_greedy(_summary(1.1, 0.06), _summary(1.0, 0.02))["pass"]


def test_plan_adds_trend_protocols_and_reject_point():
    cfg = BenchConfig(rates_mbps=[20.0], rtts_ms=[5.0], protocols=["greedy", "fh"])
    pts = {(r, t): p for r, t, p in plan(cfg)}
    assert pts[(20.0, 5.0)] == ["greedy", "fh", "sh", "auto"]
    assert pts[REJECT_POINT] == ["greedy", "reject"]
    assert plan(BenchConfig(rates_mbps=[20.0], rtts_ms=[5.0], trends=False)) == [(20.0, 5.0, ["greedy", "fh"])]


def test_plan_quick_runs_all_protocols_on_one_point():
    (r, t, protos), = plan(parse_args(["--quick"]))
    assert (r, t) == REJECT_POINT and sorted(protos) == sorted(["greedy", "reject", "fh", "sh", "auto"])


def test_parse_args_defaults_and_overrides():
    cfg = parse_args([])
    assert cfg.prompts == 5 and cfg.rates_mbps == [2.0, 20.0, 200.0] and cfg.rtts_ms == [5.0, 20.0, 50.0]
    assert cfg.max_new_tokens == 160 and cfg.trends and cfg.protocols == ["greedy", "fh"]
    q = parse_args(["--quick", "--prompts", "3", "--no-trends", "--grid-rates", "200"])
    assert q.quick and q.prompts == 3 and q.rates_mbps == [200.0] and q.rtts_ms == [20.0] and not q.trends
    assert parse_args(["--protocols", "greedy, sh"]).protocols == ["greedy", "sh"]
    with pytest.raises(SystemExit):
        parse_args(["--protocols", "greedy,bogus"])
    assert cfg.host_overhead_ms is None and parse_args(["--host-overhead-ms", "0"]).host_overhead_ms == 0.0
    with pytest.raises(SystemExit):
        parse_args(["--host-overhead-ms", "-1"])


def test_host_overhead_is_half_the_excess_per_exchange():
    rows = [_row(ex=1) | {"t_comm_s": predict_comm_s(_row(ex=1)) + 0.002},
            _row(ex=2) | {"t_comm_s": predict_comm_s(_row(ex=2)) + 0.004}]
    c = host_overhead_from(pd.DataFrame(rows))
    assert c["excess_exchange_ms"] == pytest.approx(2.0) and c["host_overhead_ms"] == pytest.approx(1.0)
    assert c["excess_round_ms"] == pytest.approx(3.0) and c["n_rounds"] == 2
    faster = host_overhead_from(pd.DataFrame([_row() | {"t_comm_s": 0.0}]))
    assert faster["host_overhead_ms"] == 0.0  # never a negative compensation
    with pytest.raises(RuntimeError, match="no rounds"):
        host_overhead_from(pd.DataFrame())


def test_build_report_shape_is_strict_json():
    grid = [{"rate_mbps": 2.0, "rtt_ms": 20.0, "protocol": "fh"} | fidelity_summary(_rounds(1.5), 0.10)]
    grid[0]["ratio"] = math.nan  # NaN must become null
    trends = {"reject": reject_vs_greedy(_summary(3.0, 0.1), _summary(1.0, 0.1)), "sh": [], "auto": []}
    overhead = {"greedy_mean_ms": math.nan, "pass": True}
    doc = build_report(BenchConfig(), grid, overhead, trends, [], {"cpu_count": 2})
    assert set(doc) == {"config", "machine", "calibration", "grid", "overhead", "trends", "errors", "failed"}
    assert doc["config"]["rates_mbps"] == [2.0, 20.0, 200.0] and doc["grid"][0]["ratio"] is None
    assert doc["overhead"]["greedy_mean_ms"] is None and doc["failed"] == ["fidelity fh @ 2 Mbps / 20 ms"]
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc


def test_failures_lists_trend_and_overhead_checks():
    trends = {"reject": None, "sh": [{"rate_mbps": 2.0, "rtt_ms": 5.0, "pass": False}],
              "auto": [{"rate_mbps": 20.0, "rtt_ms": 50.0, "pass": True}]}
    assert failures([], {"pass": False}, trends) == ["sh @ 2 Mbps / 5 ms",
                                                     "loopback overhead over ZeroMQ's floor (target <= 0.3 ms)"]


def test_only_the_required_protocols_fail_fidelity():
    grid = [{"rate_mbps": 20.0, "rtt_ms": 5.0, "protocol": p, "pass": False} for p in ("greedy", "auto")]
    assert failures(grid, {"pass": True}, {}) == ["fidelity greedy @ 20 Mbps / 5 ms"]
    assert failures(grid, {"pass": True}, {}, ("greedy", "auto")) == ["fidelity greedy @ 20 Mbps / 5 ms",
                                                                      "fidelity auto @ 20 Mbps / 5 ms"]
