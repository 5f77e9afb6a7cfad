"""--head resolution: fixed policies, the shipped default head, head directories, and clear errors."""
import pytest
import torch

from protocols.edge_side import ProtocolError, _check_head_width
from testbed.common.heads import default_head_dir, load_policy
from wisv import pairs
from wisv.decoding.speculative import AcceptAll, RejectAll
from wisv.head.judges import JudgePolicy
from wisv.head.model import DecisionHead, HeadConfig, HeadPolicy
from wisv.head.store import load_head, save_head


def test_fixed_policies_and_tau_override():
    p, tau, _ = load_policy("none")
    assert isinstance(p, RejectAll) and tau == 0.5
    p, tau, _ = load_policy("accept-all", 0.2)
    assert isinstance(p, AcceptAll) and tau == 0.2


def test_default_is_the_shipped_head_for_the_builtin_target():
    p, tau, desc = load_policy("default", None, None, 192)
    assert isinstance(p, HeadPolicy) and tau == load_head(default_head_dir()).cfg.tau
    assert (p.cfg.d_draft, p.cfg.d_target) == (96, 192) and str(default_head_dir()) in desc


def test_default_falls_back_to_greedy_equivalent_for_another_target(tmp_path):
    p, _, desc = load_policy("default", None, str(tmp_path))
    assert isinstance(p, RejectAll) and "--head PATH" in desc


def test_default_follows_the_named_pair_of_the_target(tmp_path, monkeypatch):
    """--pair smollm2 fills the target with the pair's cache dir: its default head is the edge judge
    (wisv/assets/smollm2-judges/edge), its paper head is --head wisv-paper; the toy pair's default is its paper head."""
    monkeypatch.setenv(pairs.CACHE_ENV, str(tmp_path / "cache"))
    target = tmp_path / "cache" / "pairs" / "smollm2" / "target"
    assert pairs.pair_of_target(target) == "smollm2" and pairs.pair_of_target(tmp_path) is None
    assert (default_head_dir(target) == pairs.ASSETS_DIR / "smollm2-judges" / "edge"
            == pairs.pair_default_head("smollm2"))
    assert (pairs.pair_heads("smollm2")["wisv-paper"] == pairs.ASSETS_DIR / "smollm2-head"
            == pairs.pair_head_dir("smollm2"))
    assert ({"edge", "edge-blind", "autojudge", "judge-decoding", "fly", "nll-margin"}
            <= set(pairs.pair_heads("smollm2")))
    p, _, desc = load_policy("wisv-paper", None, str(target))
    assert isinstance(p, HeadPolicy) and "smollm2-head" in desc and "h_draft" in p.inputs
    p, _, desc = load_policy("default", None, str(target))
    assert isinstance(p, JudgePolicy) and "h_draft" not in p.inputs and "smollm2-judges" in desc  # served by ef
    assert default_head_dir(None) == default_head_dir(pairs.resolve_pair("toy").target) == pairs.pair_head_dir("toy")
    monkeypatch.setitem(pairs.JUDGE_DIRS, "smollm2", tmp_path / "no-judges")
    assert default_head_dir(target) == pairs.pair_head_dir("smollm2")  # no judges shipped: the paper head
    monkeypatch.setitem(pairs.HEAD_DIRS, "smollm2", tmp_path / "missing")
    p, _, desc = load_policy("default", None, str(target))
    assert isinstance(p, RejectAll) and "no head at" in desc
    torch.manual_seed(0)
    save_head(DecisionHead(HeadConfig(d_draft=8, d_target=16, hidden=4, tau=0.3)), tmp_path / "h")
    monkeypatch.setitem(pairs.HEAD_DIRS, "smollm2", tmp_path / "h")
    p, tau, desc = load_policy("default", None, str(target), 16)
    assert isinstance(p, HeadPolicy) and tau == 0.3 and str(tmp_path / "h") in desc


def test_head_directory_and_errors(tmp_path):
    torch.manual_seed(0)
    save_head(DecisionHead(HeadConfig(d_draft=8, d_target=16, hidden=4, tau=0.3)), tmp_path / "h")
    p, tau, _ = load_policy(str(tmp_path / "h"))
    assert isinstance(p, HeadPolicy) and tau == 0.3
    assert load_policy(str(tmp_path / "h"), 0.7)[1] == 0.7
    with pytest.raises(ValueError, match="target hidden size 16"):
        load_policy(str(tmp_path / "h"), None, None, 192)
    with pytest.raises(ValueError, match="unknown head"):
        load_policy("no-such-head")


def test_edge_refuses_a_wisv_session_with_the_wrong_drafter_width():
    pol = HeadPolicy(DecisionHead(HeadConfig(d_draft=8, d_target=16, hidden=4)))
    _check_head_width(pol, "fh", 8)
    _check_head_width(pol, "greedy", 32)  # greedy never calls the head
    _check_head_width(RejectAll(), "fh", 32)
    with pytest.raises(ProtocolError, match="drafter hidden size 8"):
        _check_head_width(pol, "sh", 32)
