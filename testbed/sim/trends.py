"""The WISV paper's Table I / Fig. 4 trends, checked on a simulated table (pure functions over table.csv rows)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

SEVERAL_FOLD = 3.0  # "reject's latency grows several-fold" means at least this ratio
BARELY = 1.10  # "greedy's barely changes" means at most this ratio


@dataclass(frozen=True)
class Trend:
    """One trend: what the paper says, whether the table shows it, and the numbers behind the verdict."""

    name: str
    claim: str
    holds: bool
    detail: str

    def to_dict(self) -> dict:
        return asdict(self)


def trends(table: pd.DataFrame) -> list[Trend]:
    """Every trend the table has the cells for (a trend whose methods or links are missing is left out)."""
    checks = (_reject_vs_rate, _fh_beats_greedy, _sh_vs_fh_high_rtt, _fh_sh_crossover, _u_shape)
    return [t for check in checks if (t := check(table)) is not None]


def _lat(table: pd.DataFrame, method_prefix: str) -> pd.DataFrame:
    """Latency by (rate, rtt) rows and draft window columns, over the method labels starting with the prefix."""
    rows = table[table["method"].str.startswith(method_prefix)]
    return rows.pivot_table(index=["rate_mbps", "rtt_ms"], columns="draft_len", values="latency_s")


def _reject_vs_rate(table: pd.DataFrame) -> Trend | None:
    rej, gre = _lat(table, "reject"), _lat(table, "greedy")
    if rej.empty or gre.empty or table["rate_mbps"].nunique() < 2:
        return None
    lo, hi = table["rate_mbps"].min(), table["rate_mbps"].max()
    rtt = table["rtt_ms"].max()
    r_rej = rej.loc[(lo, rtt)] / rej.loc[(hi, rtt)]
    r_gre = gre.loc[(lo, rtt)] / gre.loc[(hi, rtt)]
    holds = bool((r_rej >= SEVERAL_FOLD).all() and (r_gre <= BARELY).all())
    return Trend("reject_grows_at_low_rate",
                 f"reject's latency grows several-fold (>= {SEVERAL_FOLD}x) from {hi:g} to {lo:g} Mbps "
                 f"at RTT {rtt:g} ms while greedy's barely changes (<= {BARELY}x)", holds,
                 f"reject x{r_rej.min():.2f}..x{r_rej.max():.2f}, greedy x{r_gre.min():.3f}..x{r_gre.max():.3f} over K")


def _fh_beats_greedy(table: pd.DataFrame) -> Trend | None:
    fh, gre = _lat(table, "WISV-FH"), _lat(table, "greedy")
    if fh.empty or gre.empty:
        return None
    ratio = (fh / gre).stack()
    return Trend("fh_beats_greedy", "WISV-FH is faster than greedy at every draft window and link",
                 bool((ratio < 1).all()),
                 f"FH/greedy latency x{ratio.min():.3f}..x{ratio.max():.3f} over {len(ratio)} cells")


def _sh_over_fh(table: pd.DataFrame) -> pd.DataFrame | None:
    sh, fh = _lat(table, "WISV-SH"), _lat(table, "WISV-FH")
    if sh.empty or fh.empty:
        sh, fh = _lat(table, "SH"), _lat(table, "FH")
    if sh.empty or fh.empty:
        return None
    return sh / fh


def _sh_vs_fh_high_rtt(table: pd.DataFrame) -> Trend | None:
    ratio = _sh_over_fh(table)
    if ratio is None:
        return None
    rtt = table["rtt_ms"].max()
    hi = table["rate_mbps"].max()
    r = ratio.loc[(hi, rtt)]
    return Trend("sh_slower_than_fh_at_high_rtt",
                 f"at RTT {rtt:g} ms SH is slower than FH (its extra round trip), shown at {hi:g} Mbps at every window",
                 bool((r > 1).all()), "SH/FH " + ", ".join(f"K={k}: x{v:.3f}" for k, v in r.items()))


def _fh_sh_crossover(table: pd.DataFrame) -> Trend | None:
    """Paper, Fig. 4 text: at 20 Mbps FH becomes slightly slower than SH at large windows (its hidden-state upload)."""
    ratio = _sh_over_fh(table)
    if ratio is None or table["rate_mbps"].nunique() < 2:
        return None
    rtt, lo = table["rtt_ms"].max(), table["rate_mbps"].min()
    r = ratio.loc[(lo, rtt)]
    ks = list(r.index)
    holds = bool(r.iloc[-1] < r.iloc[0] and r.iloc[-1] < 1)
    cross = next((k for k, v in r.items() if v < 1), None)
    return Trend("fh_slower_than_sh_at_low_rate_large_k",
                 f"at {lo:g} Mbps / {rtt:g} ms FH's uplink of K hidden vectors makes it slower than SH "
                 "at large windows (WISV paper, Fig. 4 discussion: 'under low-rate conditions (20 Mbps), "
                 "FH becomes slightly slower than SH at large draft windows')", holds,
                 "SH/FH " + ", ".join(f"K={k}: x{v:.3f}" for k, v in r.items())
                 + (f"; FH slower from K={cross}" if cross is not None else f"; no crossover up to K={ks[-1]}"))


def _u_shape(table: pd.DataFrame) -> Trend | None:
    ks = sorted(table["draft_len"].unique())
    if len(ks) < 3 or ks[0] > 4 or ks[-1] < 32:  # only a sweep from a short to a long window can show the U
        return None
    parts, holds = [], True
    for (method, link), g in table.groupby(["method", "link"], sort=False):
        lat = g.set_index("draft_len")["latency_s"].sort_index()
        best = int(lat.idxmin())
        interior = lat.index[0] < best < lat.index[-1]
        holds &= interior
        parts.append(f"{method} @ {link}: K*={best}{'' if interior else ' (at an end)'}")
    return Trend("interior_optimum",
                 f"swept over K in {ks[0]}..{ks[-1]}, every method's latency has an interior minimum "
                 "(the U-shape of Figs. 4 and 7)", bool(holds), "; ".join(parts))


def format_trends(found: list[Trend]) -> str:
    """The trends as printed lines."""
    return "\n".join(f"[{'holds' if t.holds else 'FAILS'}] {t.claim}\n        {t.detail}" for t in found)
