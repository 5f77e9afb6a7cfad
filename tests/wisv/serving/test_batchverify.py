"""Batched verification: every request's outcome equals verifying it alone, over rounds, with and without KV reuse."""
import random

import pytest
import torch

from tests.tiny_pair import make_pair
from wisv.decoding.acceptance import greedy_accept_ids
from wisv.decoding.sessions import VerifySession
from wisv.serving.batchverify import BatchVerifier, EngineConfig, pass_tokens
from wisv.serving.engine import VerifyRequest
from wisv.serving.kvbudget import MB, KVBudgetError

NEAR_TIE = 1e-4


def _check_same(block, ref):
    """Same argmax everywhere except certified near-ties; logits agree to float tolerance."""
    assert torch.allclose(block.logits, ref.logits, atol=2e-4, rtol=1e-4)
    diff = (block.argmax != ref.argmax).nonzero().flatten().tolist()
    for j in diff:
        top = torch.topk(ref.logits[j], 2).values
        assert float(top[0] - top[1]) <= NEAR_TIE, f"position {j} differs without a near-tie"


def _run(family: str, kv_reuse: bool, rounds: int = 5, seed: int = 0):
    _, target = make_pair(family, vocab=61, eos=60, seed=seed)
    rng = random.Random(seed)
    eng = BatchVerifier(target, EngineConfig(kv_reuse=kv_reuse))
    alone = {}
    prompts = {f"s{i}": [rng.randrange(1, 60) for _ in range(rng.randint(1, 12))] for i in range(4)}
    for sid, p in list(prompts.items())[:3]:
        eng.open(sid, p)
        alone[sid] = VerifySession(target, p)
    for r in range(rounds):
        if r == 2:  # a cold session joins a warm batch
            eng.open("s3", prompts["s3"])
            alone["s3"] = VerifySession(target, prompts["s3"])
        reqs = [VerifyRequest(sid, [rng.randrange(1, 60) for _ in range(rng.randint(1, 6))]) for sid in alone]
        blocks = eng.verify(reqs)
        for req in reqs:
            ref = alone[req.sid].verify(req.draft)
            _check_same(blocks[req.sid], ref)
            v = greedy_accept_ids(torch.tensor(req.draft), ref.argmax)
            assert eng.commit(req.sid, v.n_accepted, v.next_token) == alone[req.sid].commit(
                req.draft, v.n_accepted, v.next_token)
            assert eng.sessions[req.sid].seq == alone[req.sid].seq
    return eng


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("kv_reuse", [True, False])
def test_batched_equals_alone_over_rounds(family, kv_reuse):
    eng = _run(family, kv_reuse)
    if kv_reuse:  # caches cover seq[:-1] after each commit
        assert all(st.cached_len == len(st.seq) - 1 for st in eng.sessions.values())
        assert eng.memory_bytes() > 0
    else:
        assert eng.memory_bytes() == 0


def test_single_request_path_equals_alone():
    _, target = make_pair(vocab=61, eos=60)
    eng, ref = BatchVerifier(target), VerifySession(target, [3, 4, 5])
    eng.open("a", [3, 4, 5])
    for draft in ([7, 8], [9], [1, 2, 3, 4]):
        _check_same(eng.verify([VerifyRequest("a", draft)])["a"], ref.verify(draft))
        eng.commit("a", 1, 11)
        ref.commit(draft, 1, 11)


def test_timeout_budget_and_errors():
    _, target = make_pair(vocab=61, eos=60)
    eng = BatchVerifier(target, EngineConfig(session_timeout_s=10, memory_budget_mb=0.0))
    eng.open("a", [1, 2, 3])
    eng.open("b", [4, 5])
    with pytest.raises(KVBudgetError, match="memory-budget-mb is 0"):  # refused before anything is allocated
        eng.verify([VerifyRequest("a", [6, 7]), VerifyRequest("b", [8])])
    assert eng.memory_bytes() == 0 and eng.sessions["a"].seq == [1, 2, 3]  # the sessions survive
    eng.cfg.memory_budget_mb = 2048.0
    eng.verify([VerifyRequest("a", [6, 7]), VerifyRequest("b", [8])])
    eng.commit("a", 2, 9)
    assert eng.sessions["a"].seq == [1, 2, 3, 6, 7, 9]
    now = eng.sessions["b"].last_active
    assert eng.sweep(now + 5) == [] and sorted(eng.sweep(now + 11)) == ["a", "b"]
    with pytest.raises(KeyError):
        eng.verify([VerifyRequest("a", [1])])
    eng.open("c", [1])
    with pytest.raises(ValueError):
        eng.verify([VerifyRequest("c", [1]), VerifyRequest("c", [2])])
    with pytest.raises(ValueError, match="empty draft tree"):
        eng.verify([VerifyRequest("c", [], [])])
    assert eng.verify([VerifyRequest("c", [])])["c"].argmax.shape == (1,)  # an empty chain: a decode step


def test_the_budget_evicts_other_caches_before_a_pass_allocates():
    _, target = make_pair(vocab=61, eos=60)
    eng = BatchVerifier(target)
    one = eng.shape.bytes_for(8 + 2)  # a lone pass over an 8-token prompt and a 2-token draft
    eng.cfg.memory_budget_mb = 1.5 * one / MB  # room for one such cache, not two
    eng.open("a", list(range(1, 9)))
    eng.open("b", list(range(11, 19)))
    eng.verify([VerifyRequest("a", [5, 6])])
    assert eng.memory_bytes() == one  # the estimate is what the pass allocated
    eng.verify([VerifyRequest("b", [5, 6])])  # a's cache goes first (least recently used)
    assert eng.sessions["a"].cached_len == 0 and eng.memory_bytes() == one
    with pytest.raises(KVBudgetError, match="verifying 2 session"):  # two rows cannot fit however much is dropped
        eng.verify([VerifyRequest("a", [5, 6]), VerifyRequest("b", [7])])
    assert eng.memory_bytes() <= eng.cfg.memory_budget_mb * MB


def test_a_failed_pass_drops_its_caches_and_keeps_the_sessions(monkeypatch):
    _, target = make_pair(vocab=61, eos=60)
    eng, ref = BatchVerifier(target), VerifySession(target, [3, 4, 5])
    eng.open("a", [3, 4, 5])
    eng.verify([VerifyRequest("a", [7])])
    eng.commit("a", 0, 8)
    ref.verify([7])
    ref.commit([7], 0, 8)
    monkeypatch.setattr(eng, "_forward_one", lambda *a: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        eng.verify([VerifyRequest("a", [9, 10])])
    assert eng.sessions["a"].cached_len == 0 and eng.memory_bytes() == 0 and eng.sessions["a"].seq == [3, 4, 5, 8]
    monkeypatch.undo()
    _check_same(eng.verify([VerifyRequest("a", [9, 10])])["a"], ref.verify([9, 10]))  # recomputed, same block


def test_batched_rows_share_one_buffer_counted_once():
    _, target = make_pair(vocab=61, eos=60)
    eng = BatchVerifier(target)
    eng.open("a", [1, 2, 3, 4, 5, 6])
    eng.open("b", [7, 8])
    for sid in ("a", "b"):  # warm both alone first
        eng.verify([VerifyRequest(sid, [9])])
        eng.commit(sid, 1, 10)
    alone = eng.memory_bytes()
    rows = [(len(eng.sessions[s].seq), eng.sessions[s].cached_len, k) for s, k in (("a", 2), ("b", 1))]
    eng.verify([VerifyRequest("a", [11, 12]), VerifyRequest("b", [13])])
    a, b = eng.sessions["a"], eng.sessions["b"]
    assert eng.memory_bytes() == eng.shape.bytes_for(pass_tokens(rows))  # the estimate is the stacked cache
    ka, kb = a.cache.layers[0].keys, b.cache.layers[0].keys
    assert ka.untyped_storage().data_ptr() == kb.untyped_storage().data_ptr()  # views of the batch buffer
    assert ka.shape[2] == a.cached_len and kb.shape[2] == b.cached_len
    both = eng.memory_bytes()
    assert both == a.kv_bytes() == b.kv_bytes()  # one buffer, counted once by the engine
    assert both >= alone  # it holds both rows, padded
    eng.commit("a", 0, 14)  # crops a view; the buffer stays until b moves on
    assert eng.memory_bytes() == both
    eng.verify([VerifyRequest("a", [15])])  # alone: a's cache is concatenated into a buffer of its own
    assert eng.sessions["a"].cache.layers[0].keys.untyped_storage().data_ptr() != kb.untyped_storage().data_ptr()


def test_a_pass_well_within_the_budget_scans_the_caches_once():
    _, target = make_pair(vocab=61, eos=60)
    eng = BatchVerifier(target)
    eng.open("a", [3, 4, 5])
    eng.verify([VerifyRequest("a", [7])])
    assert eng.held_bound == eng.memory_bytes() > 0
    scans, memory_bytes = [], eng.memory_bytes
    eng.memory_bytes = lambda: scans.append(1) or memory_bytes()
    eng.commit("a", 1, 8)
    eng.verify([VerifyRequest("a", [9, 10])])
    assert len(scans) == 1  # the budget check before the pass used the bound; only the one after it scans
