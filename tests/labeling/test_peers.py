"""labeling peers on the built-in pair: every judge and the paper head side by side, one row per (judge, channel)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from labeling import peers
from labeling.peers import PeersConfig, run
from wisv.head.features import SCALARS
from wisv.head.judges import JudgeConfig, JudgePolicy
from wisv.head.store import save_policy
from wisv.pairs import pair_head_dir


@pytest.mark.slow
def test_peers_table_on_the_builtin_pair(tmp_path, monkeypatch):
    S = len(SCALARS)
    calls, asked = [], []

    def fake_resolve(choice, cache=None, device="cpu"):  # a third LM whose NLL is fixed per text
        asked.append(choice)
        return lambda prompt, text: calls.append((prompt, text)) or [0.5 + 0.1 * (len(text) % 7)] * max(1, len(text))
    monkeypatch.setattr(peers, "resolve_scorer", fake_resolve)
    save_policy(JudgePolicy(JudgeConfig("fly", "fly", ("edge",), (S,), tau=0.5)), tmp_path / "heads" / "fly")
    save_policy(JudgePolicy(JudgeConfig("nll-margin", "nll-margin", ("edge",), (S,), tau=0.9, tau_mode="link",
                                       t_ref_s=0.05, gamma=1.5)), tmp_path / "heads" / "nll-margin")
    cfg = PeersConfig(heads_dir=str(tmp_path / "heads"), results_dir=str(tmp_path / "res"), pair=None, prompts=3,
                      draft_len=4, max_new_tokens=24, paper_head=str(pair_head_dir("toy")))
    df = run(cfg)
    assert set(zip(df.judge, df.channel)) == {(j, c) for j in ("greedy SD", "wisv-paper", "fly", "nll-margin")
                                              for c in ("good", "poor")}
    assert (df.set_index(["judge", "channel"]).loc[("greedy SD", "poor"), "matches_target"]) == 1.0
    greedy = df.set_index(["judge", "channel"]).loc[("greedy SD", "poor")]  # paired against itself: nothing moves
    assert greedy["lost"] == greedy["gained"] == 0 and greedy["delta_ci_low"] == greedy["delta_ci_high"] == 0
    acc = df["accuracy"] - greedy["accuracy"]  # the paired counts add up to the accuracy delta
    assert np.allclose((df["gained"] - df["lost"]) / 3, acc) and (df["delta_ci_low"] <= acc + 1e-9).all()
    assert asked == ["auto"] and calls and all(isinstance(p, str) and isinstance(t, str) for p, t in calls)
    ext = df.set_index(["judge", "channel"])["fluency_ext_ppl_ratio"]  # the third LM's ratio: 1 for greedy SD itself
    assert ext.loc[("greedy SD", "poor")] == pytest.approx(1.0) and ext.notna().all()
    link = df[df.judge == "nll-margin"].set_index("channel")["tau_in_force"]
    assert link["good"] < link["poor"]  # the link-mode judge is stricter on the good link
    assert set(df[df.judge != "greedy SD"].protocol) == {"fh", "ef"}
    assert (df["rounds_per_100_tokens"] > 0).all() and pd.read_csv(tmp_path / "res" / "peers.csv").shape == df.shape
    with pytest.raises(ValueError, match="not in"):
        run(PeersConfig(heads_dir=str(tmp_path / "heads"), heads=("nope",), pair=None))


def test_peers_frontier_over_tau(tmp_path, monkeypatch):
    monkeypatch.setattr(peers, "resolve_scorer", lambda *a, **k: None)
    save_policy(JudgePolicy(JudgeConfig("fly", "fly", ("edge",), (len(SCALARS),), tau=0.5)), tmp_path / "heads" / "fly")
    cfg = PeersConfig(heads_dir=str(tmp_path / "heads"), results_dir=str(tmp_path / "res"), pair=None, prompts=2,
                      draft_len=4, max_new_tokens=16, paper_head=None, channels={"poor": (3.0, 45.0)},
                      taus=(0.0, 1.0))
    df = run(cfg).set_index("judge")
    assert list(df.index) == ["greedy SD", "fly", "fly tau=0", "fly tau=1"]
    assert df.loc["fly tau=0", "tau_in_force"] == 0.0 and df.loc["fly tau=1", "tau_in_force"] == 1.0
    assert df.loc["fly tau=0", "accepted_mismatches_per_prompt"] == 0  # tau 0 accepts nothing: greedy SD
    assert df.loc["fly tau=0", "aal"] == df.loc["greedy SD", "aal"]
