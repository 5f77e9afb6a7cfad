"""The real SmolLM2 pair: greedy chain and tree SD reproduce target-only greedy on QA test prompts, in process and
through a real testbed.run; skipped where the pair is not built, a failure where $WISV_REQUIRE_PAIRS names it (CI)."""
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from wisv.decoding.lossless import check_lossless
from wisv.decoding.speculative import speculative_generate
from wisv.decoding.treespec import tree_generate
from wisv.models.loader import load_pair
from wisv.pairs import PairNotBuilt, default_prompts_file, resolve_pair
from wisv.tasks.evaluate import greedy_reference
from wisv.tasks.prompts import prompt_rows

N_PROMPTS = 6
MAX_NEW = 40
pytestmark = pytest.mark.slow  # every test here needs the real pair (make test-fast leaves them out)
REQUIRE_ENV = "WISV_REQUIRE_PAIRS"  # comma-separated pair names whose absence fails instead of skipping


def _paths():
    try:
        return resolve_pair("smollm2")
    except PairNotBuilt as e:
        if "smollm2" in os.environ.get(REQUIRE_ENV, "").split(","):
            pytest.fail(f"${REQUIRE_ENV} requires the smollm2 pair: {e}")
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def setup():
    paths = _paths()
    torch.set_num_threads(1)
    drafter, target, tok = load_pair(paths.drafter, paths.target)
    rows = prompt_rows(tok, "test", N_PROMPTS, default_prompts_file("smollm2"), need_answers=True)
    prompts = [r["prompt_ids"] for r in rows]
    return drafter, target, prompts, [greedy_reference(target, ids, MAX_NEW) for ids in prompts]


def _assert_lossless(target, prompts, refs, outputs):
    failures = []
    for i, (ids, ref, got) in enumerate(zip(prompts, refs, outputs)):
        rep = check_lossless(target, ids, ref, got)
        if not rep.ok:
            failures.append((i, rep.position, rep.gap))
    assert not failures, f"divergences beyond floating-point near-ties (prompt, position, gap): {failures}"


@pytest.mark.parametrize("k", [4, 8])
def test_greedy_chain_sd_is_lossless_on_smollm2(setup, k):
    drafter, target, prompts, refs = setup
    outs = [speculative_generate(drafter, target, ids, max_new_tokens=MAX_NEW, draft_len=k) for ids in prompts]
    _assert_lossless(target, prompts, refs, [o.tokens for o in outs])
    assert sum(r.accepted for o in outs for r in o.rounds) > 0, "the drafter never got a token accepted"


def test_tree_sd_is_lossless_on_smollm2(setup):
    drafter, target, prompts, refs = setup
    outs = [tree_generate(drafter, target, ids, max_new_tokens=MAX_NEW, budget=16, proactive=2) for ids in prompts]
    _assert_lossless(target, prompts, refs, [o.tokens for o in outs])
    assert max(r.size for o in outs for r in o.rounds) > max(r.depth for o in outs for r in o.rounds), \
        "no round drafted a branching tree"


@pytest.mark.parametrize("protocol", ["sh", "tree"])
def test_testbed_run_on_smollm2_matches_target(tmp_path, protocol):
    _paths()
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "testbed.run", "--pair", "smollm2", "--protocol", protocol, "--head", "none",
           "--prompts", "3", "--max-new-tokens", str(MAX_NEW), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["protocol"]) == [protocol]
    assert (summary["matches_target"] == 1.0).all(), summary.to_string()


FEATURE_HEAD = Path(__file__).resolve().parents[3] / "wisv/assets/smollm2-feature-head"


def test_the_shipped_feature_head_is_slim_and_drafts_losslessly_beside_the_pairs_drafter(setup):
    from wisv.decoding.featdraft import FeatureDraftSession, draft_lm_head, load_head, read_head_config
    from wisv.decoding.speculative import speculative_generate
    from wisv.models.restricted_head import RestrictedHead
    doc = read_head_config(FEATURE_HEAD)
    assert doc["frozen"]["embedding"] == "the drafter's" and (FEATURE_HEAD / "head.pt").stat().st_size < 10_000_000
    drafter, target, prompts, refs = setup
    head = load_head(FEATURE_HEAD, drafter)  # the embedding's digest is the pair's
    assert isinstance(draft_lm_head(head, drafter), RestrictedHead)
    out = speculative_generate(drafter, target, prompts[0], max_new_tokens=MAX_NEW, draft_len=8,
                               make_draft=lambda ids: FeatureDraftSession(drafter, ids, head))
    assert out.tokens == refs[0]


def test_a_float16_drafter_and_its_feature_head_stay_lossless_through_a_testbed_run(tmp_path):
    """--drafter-dtype float16: the UE casts its drafter after the feature head loads beside it (load_with_head);
    the target stays float32, so the outputs are target-only's."""
    import json
    _paths()
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "testbed.run", "--pair", "smollm2", "--protocol", "greedy", "--head", "none",
           "--drafter-dtype", "float16", "--drafter-head", str(FEATURE_HEAD), "--prompts", "2",
           "--max-new-tokens", "24", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (pd.read_csv(out / "summary.csv")["matches_target"] == 1.0).all()
    assert json.loads((out / "config.json").read_text())["drafter_dtype"] == "float16"
