"""The edge's WDT predictor (wisv/serving/wdt.py) on hand-built blocks and round records."""
import numpy as np
import pandas as pd
import pytest

from wisv.serving.wdt import (
    FEATURES,
    NO_FEATURES,
    SessionHistory,
    WDTPredictor,
    confidence_summary,
    design,
    evaluate,
    fit_ridge,
    fit_wdt,
    running_mean_g,
    split_prompts,
    stop_depth,
    update_session,
)


def test_confidence_summary_by_hand():
    f = np.array([[0.9, 0.2, 0.8], [0.5, 1.0, 0.1], [0.4, 1.8, 0.0]])
    s = confidence_summary(f)
    assert s["draft_conf_survival"] == pytest.approx(0.9 + 0.45 + 0.18)
    assert s["draft_first_doubt"] == 2 and s["draft_conf_min"] == pytest.approx(0.4)
    assert s["draft_entropy_mean"] == pytest.approx(1.0) and s["draft_margin_mean"] == pytest.approx(0.3)
    with pytest.raises(ValueError):
        confidence_summary(np.zeros((0, 3)))


def test_history_and_running_mean():
    h = SessionHistory()
    assert running_mean_g(h, 8) == 5.0  # K / 2 + 1 before any round
    h = update_session(update_session(h, 8, 8, 9), 8, 2, 3)
    assert (h.rounds, h.drafted, h.accepted, h.full, h.committed) == (2, 16, 10, 1, 12)
    assert running_mean_g(h, 8) == 6.0
    with pytest.raises(ValueError):
        update_session(h, 2, 3, 4)


def test_fit_ridge_recovers_a_linear_law():
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(200), rng.normal(5, 2, 200), rng.normal(-1, 3, 200)])
    y = x @ np.array([1.0, 2.0, -0.5])
    assert np.allclose(fit_ridge(x, y, 1e-9), [1.0, 2.0, -0.5], atol=1e-6)


def records(n_prompts: int, seed: int = 0) -> pd.DataFrame:
    """Rounds whose accepted length is the block's first doubt (the confidence tells it, the history cannot)."""
    rng, rows = np.random.default_rng(seed), []
    for p in range(n_prompts):
        for r in range(10):
            k = 8
            doubt = int(rng.integers(0, k + 1))
            conf = np.where(np.arange(k) < doubt, 0.95, 0.3)
            f = np.column_stack([conf, 1 - conf, conf / 2])
            rows.append({"prompt_id": f"p{p}", "round": r, "drafted": k, "accepted": doubt,
                         "committed": doubt + 1, **confidence_summary(f)})
    return pd.DataFrame(rows)


def test_predictor_beats_the_running_mean_on_held_out_prompts():
    train, test = records(30, seed=0), records(10, seed=1)
    pred = fit_wdt(train)
    e = evaluate(pred, test)
    assert e["mae_g_predicted"] < 0.5 * e["mae_g_running_mean"]
    assert e["mae_g_history_only"] > e["mae_g_predicted"]
    assert e["wdt_tokens_per_round"] == pytest.approx((8 - test["accepted"]).mean())


def test_predictions_are_clipped_and_saved(tmp_path):
    pred = WDTPredictor([0.0] * len(FEATURES), [100.0] + [0.0] * (len(NO_FEATURES) - 1))
    assert pred.accepted(8, SessionHistory(), None) == 8.0 and pred.g(8, SessionHistory(), None) == 9.0
    assert pred.wasted(8, SessionHistory(), None) == 0.0
    assert stop_depth(pred, SessionHistory(), 16) == 16
    back = WDTPredictor.load(pred.save(tmp_path / "w.json"))
    assert back.coef_base == pred.coef_base
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a WDT predictor"):
        WDTPredictor.load(tmp_path / "bad.json")


def test_design_uses_only_earlier_rounds_of_the_same_prompt():
    df = records(2)
    x, y, base, has = design(df)
    assert has.all() and len(x) == len(df)
    assert base[0] == 5.0 and base[10] == 5.0  # each prompt's first round: K / 2 + 1
    assert base[1] == df["committed"].iloc[0]


def test_split_prompts_is_seeded():
    ids = [f"p{i}" for i in range(50)]
    assert split_prompts(ids, 0.3, 1) == split_prompts(ids, 0.3, 1) != split_prompts(ids, 0.3, 2)


def test_edge_batcher_uses_the_predictor_and_tracks_the_session():
    from protocols.wire import MsgType, make
    from testbed.live.edge.edgebatch import DraftBatcher

    class Sess:  # what expected_g reads of an EdgeSession
        rounds, generated = 0, 0
    pred = fit_wdt(records(30))
    batcher, s = DraftBatcher(None, wdt=pred), Sess()
    sure = np.tile(np.array([0.99, 0.01, 0.98], np.float16), (8, 1))
    doubt = np.tile(np.array([0.2, 3.0, 0.05], np.float16), (8, 1))
    msg = lambda f: make(MsgType.DRAFT, "s", {"tokens": np.zeros(8, np.int32), "features": f}, round=0,  # noqa: E731
                         t_draft_s=0.0)
    assert batcher.expected_g(s, msg(sure), 8) > batcher.expected_g(s, msg(doubt), 8) + 3
    s.rounds, s.generated = 1, 9  # the first round committed 9: all 8 accepted
    batcher.expected_g(s, msg(sure), 8)
    assert batcher.histories[s][0] == SessionHistory(1, 8, 8, 1, 9)
    assert DraftBatcher(None).expected_g(s, msg(sure), 8) == 9.0  # no predictor: the running mean


def test_stop_depth_on_the_verdict():
    from protocols.wire import MsgType, make
    from testbed.live.edge.edgebatch import DraftBatcher
    from testbed.live.edge.replies import with_stop_depth

    class Sess:
        rounds, generated, draft_len = 2, 6, 8  # two rounds of 3 committed: 2 accepted of 8 each
    pred = fit_wdt(records(30))
    batcher, s = DraftBatcher(None, wdt=pred), Sess()
    batcher.histories[s] = (SessionHistory(1, 8, 2, 0, 3), 1, 3, 8)
    depth = batcher.stop_depth(s)
    assert 1 <= depth <= 8 and depth == stop_depth(pred, SessionHistory(2, 16, 4, 0, 6), 8)
    assert DraftBatcher(None).stop_depth(s) is None
    verdict = lambda done: make(MsgType.VERDICT, "s", None, round=1, n_accepted=2, next_token=3,  # noqa: E731
                                mismatches=1, queried=0, t_verify_s=0.0, t_head_s=0.0, done=done)
    assert with_stop_depth(verdict(False), 3).header["stop_depth"] == 3
    assert "stop_depth" not in with_stop_depth(verdict(True), 3).header  # the session ends: nothing to suggest
    assert "stop_depth" not in with_stop_depth(verdict(False), None).header
