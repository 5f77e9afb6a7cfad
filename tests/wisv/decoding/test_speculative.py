"""The in-process speculative loop on randomly initialised Llama and Qwen2 pairs: lossless greedy, limits, sampling."""
import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from tests.tiny_pair import make_pair
from wisv.decoding.lossless import check_lossless
from wisv.decoding.speculative import AcceptAll, RejectAll, speculative_generate, target_greedy
from wisv.tasks.evaluate import greedy_reference

VOCAB, EOS = 61, 60
SHAPES = [  # (family, hidden, layers, heads, kv_heads)
    ("llama", 32, 2, 4, 2),
    ("llama", 64, 3, 4, 4),
    ("qwen2", 48, 2, 4, 2),
    ("qwen2", 64, 1, 8, 2),
]


@pytest.fixture(scope="module", params=SHAPES, ids=lambda s: f"{s[0]}-{s[1]}x{s[2]}")
def pair(request):
    return make_pair(*request.param)


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2, 4, 8, 16])
def test_greedy_is_lossless_on_random_configs(pair, k):
    drafter, target = pair
    gen = torch.Generator().manual_seed(k)
    for _ in range(3):
        prompt = torch.randint(1, EOS, (int(torch.randint(1, 12, (1,), generator=gen)),), generator=gen).tolist()
        ref = greedy_reference(target, prompt, max_new_tokens=48)
        out = speculative_generate(drafter, target, prompt, max_new_tokens=48, draft_len=k)
        rep = check_lossless(target, prompt, ref, out.tokens)
        assert rep.ok, f"diverged at {rep.position} with top-2 gap {rep.gap:.3g} > 1e-4"
        assert len(out.tokens) == len(ref)


def test_drafter_agrees_often_enough_to_exercise_rollback(pair):
    drafter, target = pair
    out = speculative_generate(drafter, target, [3, 4, 5], max_new_tokens=48, draft_len=8)
    accepted = [r.accepted for r in out.rounds]
    assert max(accepted) > 0 and min(accepted) < 8  # both accept and reject paths are taken


def test_round_records_add_up():
    drafter, target = make_pair(*SHAPES[0])
    out = speculative_generate(drafter, target, [1, 2], max_new_tokens=40, draft_len=4)
    assert sum(len(r.committed) for r in out.rounds) == len(out.tokens)
    for r in out.rounds:
        assert r.accepted <= r.drafted and len(r.target_argmax) == r.drafted + 1
        assert r.committed == (r.draft_tokens[: r.accepted] + [r.next_token])[: len(r.committed)]
        assert r.mismatches == [i for i in range(r.drafted) if r.draft_tokens[i] != r.target_argmax[i]]


def test_stops_at_eos_and_budget():
    drafter, target = make_pair(*SHAPES[0])
    with torch.no_grad():  # make EOS the target's favourite token after any context
        target.lm_head.weight[EOS] += 10.0 * target.lm_head.weight.abs().mean()
        target.model.norm.weight.abs_()
    out = speculative_generate(drafter, target, [5, 6], max_new_tokens=30, draft_len=4)
    assert out.tokens[-1] == EOS and EOS not in out.tokens[:-1]
    drafter, target = make_pair(*SHAPES[1])
    for budget in (1, 5, 17):
        assert len(speculative_generate(drafter, target, [5], max_new_tokens=budget, draft_len=8).tokens) <= budget


def test_wisv_limits():
    drafter, target = make_pair(*SHAPES[2])
    prompt = [7, 8, 9]
    greedy = speculative_generate(drafter, target, prompt, max_new_tokens=40, draft_len=8)
    tau0 = speculative_generate(drafter, target, prompt, max_new_tokens=40, draft_len=8, rule="wisv",
                                policy=AcceptAll(), tau=0.0)
    none = speculative_generate(drafter, target, prompt, max_new_tokens=40, draft_len=8, rule="wisv",
                                policy=RejectAll())
    assert tau0.tokens == greedy.tokens == none.tokens
    allin = speculative_generate(drafter, target, prompt, max_new_tokens=40, draft_len=8, rule="wisv",
                                 policy=AcceptAll(), tau=0.5)
    assert all(r.accepted == r.drafted for r in allin.rounds)
    assert any(r.mismatches for r in allin.rounds)  # mismatches existed and were accepted


def test_wisv_records_hidden_states_at_mismatches():
    drafter, target = make_pair(*SHAPES[0])
    out = speculative_generate(drafter, target, [1, 2, 3], max_new_tokens=30, draft_len=8, rule="wisv",
                               policy=RejectAll())
    rounds = [r for r in out.rounds if r.mismatches]
    assert rounds
    for r in rounds:
        assert r.h_draft.shape == (len(r.mismatches), 32) and r.h_target.shape == (len(r.mismatches), 32)
        assert r.reject_probs == [1.0] * len(r.mismatches)


def test_a_run_without_edge_records_gives_the_same_tokens_and_wisv_keeps_them():
    drafter, target = make_pair(*SHAPES[0])
    full, bare = (speculative_generate(drafter, target, [1, 2, 3], max_new_tokens=30, draft_len=8, record_edge=e)
                  for e in (True, False))
    assert full.tokens == bare.tokens and [r.mismatches for r in full.rounds] == [r.mismatches for r in bare.rounds]
    assert any(r.edge is not None for r in full.rounds) and all(r.edge is None for r in bare.rounds)
    wisv = speculative_generate(drafter, target, [1, 2, 3], max_new_tokens=30, draft_len=8, rule="wisv",
                                policy=RejectAll(), record_edge=False)  # a wisv policy may read them: kept
    assert all(r.edge is not None for r in wisv.rounds if r.mismatches)


@pytest.mark.slow
def test_sampling_is_seeded_and_matches_target_first_token():
    drafter, target = make_pair(*SHAPES[0])
    prompt = [4, 5]
    def run(seed: int) -> list[int]:
        return speculative_generate(drafter, target, prompt, max_new_tokens=12, draft_len=4, rule="sampling",
                                    generator=torch.Generator().manual_seed(seed)).tokens
    assert run(3) == run(3)
    n = 1000
    firsts = np.bincount([speculative_generate(drafter, target, prompt, max_new_tokens=2, draft_len=1,
                                               rule="sampling", generator=torch.Generator().manual_seed(s)).tokens[0]
                          for s in range(n)], minlength=VOCAB)
    with torch.no_grad():
        p = torch.softmax(target(torch.tensor([prompt])).logits[0, -1].double(), -1).numpy()
    keep = p * n >= 5  # pool rare tokens for a valid chi-square
    obs = np.append(firsts[keep], firsts[~keep].sum())
    exp = np.append(p[keep], p[~keep].sum()) * n
    assert chisquare(obs, exp / exp.sum() * n).pvalue > 1e-3


@pytest.mark.parametrize("kwargs,msg", [
    (dict(rule="beam"), "unknown rule"),
    (dict(draft_len=0), ">= 1"),
    (dict(rule="sampling"), "seeded torch.Generator"),
])
def test_bad_arguments(kwargs, msg):
    drafter, target = make_pair(*SHAPES[0])
    args = dict(max_new_tokens=4, draft_len=2) | kwargs
    with pytest.raises(ValueError, match=msg):
        speculative_generate(drafter, target, [1], **args)


def test_a_pending_prompt_rides_with_the_first_block_in_one_target_pass():
    """VerifySession(prefill=False) feeds the prompt with the first draft: the same block, one target call fewer."""
    from unittest import mock

    from wisv.decoding import sessions
    _, target = make_pair(*SHAPES[0])
    with mock.patch.object(sessions, "cached_forward", wraps=sessions.cached_forward) as calls:  # every target pass
        prompt, draft = [4, 9, 2, 7, 7], [3, 5, 1]
        now, later = sessions.VerifySession(target, prompt), sessions.VerifySession(target, prompt, prefill=False)
        assert calls.call_count == 1  # only the eager session's prefill ran
        a, b = now.verify(draft), later.verify(draft)
        assert calls.call_count == 3 and b.logits.shape == a.logits.shape and b.hidden.shape == a.hidden.shape
    assert torch.equal(a.argmax, b.argmax) and torch.allclose(a.logits, b.logits, atol=1e-4)
    assert now.commit(draft, 1, int(a.argmax[1])) == later.commit(draft, 1, int(b.argmax[1]))
    assert later.cached_len == now.cached_len == len(later.seq) - 1  # both back to the invariant


def test_a_draft_without_predictor_features_proposes_the_same_tokens():
    from wisv.decoding.sessions import DraftSession
    drafter, _ = make_pair(*SHAPES[1])
    full, bare = DraftSession(drafter, [3, 4, 5]).draft(6), DraftSession(drafter, [3, 4, 5]).draft(6, features=False)
    assert bare.tokens == full.tokens and torch.allclose(bare.hidden, full.hidden)
    assert full.features.shape == (6, 4) and bare.features is None


@pytest.mark.parametrize("shape", SHAPES[:2] + [("qwen2", 32, 2, 4, 2)], ids=lambda s: f"{s[0]}-{s[1]}x{s[2]}")
def test_target_greedy_is_generate(shape):
    """The bench's same-forward baseline: target-only through cached_forward gives generate's tokens (EOS included,
    budget kept)."""
    _, target = make_pair(*shape)
    for prompt, n in (([3, 4, 5], 40), ([7, 1, 22, 9], 5)):
        ref = greedy_reference(target, prompt, max_new_tokens=n)
        assert target_greedy(target, prompt, max_new_tokens=n, eos_token_id=60) == ref
    with pytest.raises(ValueError, match="max_new_tokens"):
        target_greedy(target, [3], max_new_tokens=0)
