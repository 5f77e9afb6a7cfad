"""Acceptance rules on hand-built tensors: greedy, speculative sampling, WISV semantic acceptance."""
import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from wisv.decoding.acceptance import greedy_accept, speculative_sampling_accept, wisv_accept

V = 6


def logits_for(argmax_ids: list[int]) -> torch.Tensor:
    """Logits [len, V] whose argmax is the intended token at each row."""
    x = torch.zeros(len(argmax_ids), V)
    for i, t in enumerate(argmax_ids):
        x[i, t] = 5.0
    return x


@pytest.mark.parametrize("draft,target,n,nxt,mism", [
    ([1, 2, 3], [1, 2, 3, 4], 3, 4, ()),          # all match: bonus
    ([1, 2, 3], [5, 2, 3, 4], 0, 5, (0,)),        # first token wrong: correction
    ([1, 2, 3], [1, 0, 3, 4], 1, 0, (1,)),        # middle mismatch
    ([1, 2, 3], [1, 2, 0, 4], 2, 0, (2,)),        # last mismatch
    ([1, 2, 3], [0, 2, 0, 4], 0, 0, (0, 2)),      # several mismatches: stop at first
    ([4], [4, 1], 1, 1, ()),                      # K=1 accepted
])
def test_greedy_table(draft, target, n, nxt, mism):
    v = greedy_accept(torch.tensor(draft), logits_for(target))
    assert (v.n_accepted, v.next_token, v.mismatches) == (n, nxt, mism)
    assert v.is_bonus == (n == len(draft))
    assert v.committed(draft) == draft[:n] + [nxt]


@pytest.mark.parametrize("probs,tau,n,nxt,rej", [
    ([0.9, 0.1], 0.5, 1, 0, 1),     # mismatch at 1 rejected (p >= tau); mismatch at 3 never reached
    ([0.2, 0.9], 0.5, 3, 0, 3),     # mismatch at 1 accepted: draft token committed; rejected at 3
    ([0.2, 0.3], 0.5, 4, 5, None),  # both accepted: whole draft plus bonus
    ([0.2, 0.3], 0.0, 1, 0, 1),     # tau = 0 rejects every mismatch (greedy)
    ([1.0, 1.0], math.inf, 4, 5, None),  # tau = inf accepts everything
    ([0.5, 0.1], 0.5, 1, 0, 1),     # p == tau rejects
])
def test_wisv_table(probs, tau, n, nxt, rej):
    draft = torch.tensor([1, 2, 3, 4])
    target_argmax = torch.tensor([1, 0, 3, 0, 5])  # mismatches at 1 and 3
    v = wisv_accept(draft, target_argmax, torch.tensor(probs), tau)
    assert (v.n_accepted, v.next_token, v.rejected_at) == (n, nxt, rej)
    assert v.mismatches == (1, 3)


def test_wisv_tau0_equals_greedy():
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        k = int(torch.randint(1, 9, (1,), generator=gen))
        draft = torch.randint(0, 3, (k,), generator=gen)
        logits = torch.randn(k + 1, 3, generator=gen)
        g = greedy_accept(draft, logits)
        w = wisv_accept(draft, logits.argmax(-1), torch.rand(len(g.mismatches), generator=gen), 0.0)
        assert (g.n_accepted, g.next_token) == (w.n_accepted, w.next_token)


def test_wisv_rejects_wrong_prob_count():
    with pytest.raises(ValueError, match="2 mismatches"):
        wisv_accept(torch.tensor([1, 2]), torch.tensor([0, 0, 0]), torch.tensor([0.5]), 0.5)


def test_sampling_accepts_when_p_ge_q():
    p = torch.tensor([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]])
    q = torch.tensor([[0.0, 1.0, 0.0]])
    v = speculative_sampling_accept(torch.tensor([1]), q, p, torch.Generator().manual_seed(1))
    assert v.n_accepted == 1 and v.rejected_at is None


def test_sampling_residual_never_picks_overdrafted_token():
    p = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    q = torch.tensor([[0.0, 0.0, 1.0]])  # drafted token 2 has p = 0: always rejected
    gen = torch.Generator().manual_seed(2)
    for _ in range(50):
        v = speculative_sampling_accept(torch.tensor([2]), q, p, gen)
        assert v.n_accepted == 0 and v.next_token in (0, 1)


def test_sampling_seeded_determinism():
    p, q = torch.softmax(torch.randn(5, V), -1), torch.softmax(torch.randn(4, V), -1)
    runs = [speculative_sampling_accept(torch.tensor([0, 1, 2, 3]), q, p, torch.Generator().manual_seed(7))
            for _ in range(2)]
    assert runs[0] == runs[1]


def _sample_sequence(p_rows, q_rows, k, gen, n_tokens):
    """Generate n_tokens with context-free per-position distributions by speculative rounds."""
    out = []
    while len(out) < n_tokens:
        pos = len(out)
        q = q_rows[pos: pos + k]
        draft = torch.stack([torch.multinomial(r, 1, generator=gen)[0] for r in q])
        v = speculative_sampling_accept(draft, q, p_rows[pos: pos + k + 1], gen)
        out.extend(v.committed(draft.tolist()))
    return out[:n_tokens]


@pytest.mark.slow
def test_sampling_preserves_target_distribution():
    """Joint distribution of the first two output tokens equals the target's (chi-square, seeded)."""
    gen = torch.Generator().manual_seed(123)
    v, k, n = 4, 3, 6000
    p_rows = torch.softmax(torch.randn(8, v, generator=gen) * 1.5, -1).double()
    q_rows = torch.softmax(torch.randn(8, v, generator=gen) * 1.5, -1).double()
    counts = np.zeros(v * v)
    for _ in range(n):
        a, b = _sample_sequence(p_rows, q_rows, k, gen, 2)
        counts[a * v + b] += 1
    expected = (p_rows[0][:, None] * p_rows[1][None, :]).flatten().numpy()
    assert chisquare(counts, expected / expected.sum() * n).pvalue > 1e-3
    # The drafter's distribution is measurably different, so this test can fail.
    q_expected = (q_rows[0][:, None] * q_rows[1][None, :]).flatten().numpy()
    assert chisquare(counts, q_expected / q_expected.sum() * n).pvalue < 1e-6


def test_wisv_never_keeps_a_mismatching_draft_eos():
    draft, argmax = torch.tensor([5, 2, 7]), torch.tensor([5, 9, 7, 1])  # draft EOS (2) where the target goes on
    assert wisv_accept(draft, argmax, torch.tensor([0.0]), 0.5).n_accepted == 3  # without the EOS id: kept
    v = wisv_accept(draft, argmax, torch.tensor([0.0]), 0.5, eos_token_id=2)
    assert (v.n_accepted, v.next_token, v.rejected_at) == (1, 9, 1)
    assert wisv_accept(torch.tensor([2]), torch.tensor([2, 4]), torch.zeros(0), 0.5, 2).n_accepted == 1  # a match
