"""The Table I / Fig. 4 trend checks on hand-built tables."""
import pandas as pd

from testbed.sim.trends import format_trends, trends


def _table(lat: dict[tuple[str, float, int], float]) -> pd.DataFrame:
    rows = [{"method": m, "rate_mbps": r, "rtt_ms": 50.0, "draft_len": k, "link": f"{r:g} Mbps / 50 ms",
             "latency_s": v} for (m, r, k), v in lat.items()]
    return pd.DataFrame(rows)


def _by_name(table: pd.DataFrame) -> dict:
    return {t.name: t for t in trends(table)}


def test_paper_like_table_holds_every_trend():
    lat = {}
    for k, (g, rej, fh_hi, sh_hi, fh_lo, sh_lo) in {
            2: (3.0, 4.0, 2.5, 2.8, 2.6, 2.9), 8: (2.0, 3.0, 1.5, 1.7, 1.6, 1.7),
            64: (2.5, 5.0, 2.0, 2.1, 2.4, 2.2)}.items():
        lat |= {("greedy", 500.0, k): g, ("greedy", 20.0, k): g * 1.01, ("reject", 500.0, k): rej,
                ("reject", 20.0, k): rej * 5, ("WISV-FH", 500.0, k): fh_hi, ("WISV-SH", 500.0, k): sh_hi,
                ("WISV-FH", 20.0, k): fh_lo, ("WISV-SH", 20.0, k): sh_lo}
    found = _by_name(_table(lat))
    assert set(found) == {"reject_grows_at_low_rate", "fh_beats_greedy", "sh_slower_than_fh_at_high_rtt",
                          "fh_slower_than_sh_at_low_rate_large_k", "interior_optimum"}
    assert all(t.holds for t in found.values()), format_trends(list(found.values()))
    assert "FH slower from K=64" in found["fh_slower_than_sh_at_low_rate_large_k"].detail


def test_failures_are_reported():
    lat = {("greedy", 500.0, 8): 2.0, ("greedy", 20.0, 8): 2.5, ("reject", 500.0, 8): 3.0, ("reject", 20.0, 8): 6.0,
           ("WISV-FH", 500.0, 8): 2.1, ("WISV-SH", 500.0, 8): 2.0, ("WISV-FH", 20.0, 8): 2.4,
           ("WISV-SH", 20.0, 8): 2.6}
    found = _by_name(_table(lat))
    assert not found["reject_grows_at_low_rate"].holds  # x2 only, and greedy moved x1.25
    assert not found["fh_beats_greedy"].holds
    assert not found["sh_slower_than_fh_at_high_rtt"].holds
    assert "interior_optimum" not in found  # one window: no sweep to judge


def test_optimum_at_an_end_fails():
    lat = {("greedy", 500.0, k): v for k, v in {2: 1.0, 8: 2.0, 32: 3.0}.items()}
    found = _by_name(_table(lat))
    assert not found["interior_optimum"].holds and "K*=2 (at an end)" in found["interior_optimum"].detail
