"""The built-in pair: greedy SD reproduces target-only greedy on 50 test prompts for every K (near-ties certified)."""
import pytest
import torch

from wisv.decoding.lossless import check_lossless
from wisv.decoding.speculative import AcceptAll, speculative_generate
from wisv.models.loader import load_pair
from wisv.tasks.evaluate import greedy_reference
from wisv.tasks.prompts import encode_prompt
from wisv.tasks.toydata import load_split

N_PROMPTS = 50


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    drafter, target, tok = load_pair()
    prompts = [encode_prompt(tok, p.prompt) for p in load_split("test", N_PROMPTS)]
    refs = [greedy_reference(target, ids) for ids in prompts]
    return drafter, target, prompts, refs


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2, 4, 8, 16])
def test_greedy_sd_is_lossless_on_builtin_pair(setup, k):
    drafter, target, prompts, refs = setup
    failures, accepted = [], 0
    for i, (ids, ref) in enumerate(zip(prompts, refs)):
        out = speculative_generate(drafter, target, ids, max_new_tokens=160, draft_len=k)
        accepted += sum(r.accepted for r in out.rounds)
        rep = check_lossless(target, ids, ref, out.tokens)
        if not rep.identical:
            print(f"prompt {i}: diverged at {rep.position}, target top-2 gap {rep.gap:.3g}")
        if not rep.ok:
            failures.append((i, rep.position, rep.gap))
    assert not failures, f"divergences beyond floating-point near-ties (prompt, position, gap): {failures}"
    assert accepted > 0


@pytest.mark.slow
def test_wisv_limits_on_builtin_pair(setup):
    drafter, target, prompts, refs = setup
    for ids, ref in list(zip(prompts, refs))[:5]:
        tau0 = speculative_generate(drafter, target, ids, max_new_tokens=160, draft_len=8, rule="wisv",
                                    policy=AcceptAll(), tau=0.0)
        assert check_lossless(target, ids, ref, tau0.tokens).ok
        allin = speculative_generate(drafter, target, ids, max_new_tokens=160, draft_len=8, rule="wisv",
                                     policy=AcceptAll(), tau=0.5)
        assert all(r.accepted == r.drafted for r in allin.rounds)
