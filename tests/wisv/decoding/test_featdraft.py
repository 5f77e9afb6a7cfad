"""The EAGLE-style feature head and its DraftSession (wisv/decoding/featdraft.py)."""
from __future__ import annotations

import torch

from tests.tiny_pair import make_pair
from wisv.decoding.featdraft import (
    FeatureDraftSession,
    FeatureHead,
    load_head,
    save_head,
)
from wisv.decoding.speculative import speculative_generate
from wisv.tasks.evaluate import greedy_reference

VOCAB, EOS, D = 61, 60, 32


def pair_and_head(window: int = 16, layers: int = 1):
    drafter, target = make_pair("llama", D, 2, 4, 2, vocab=VOCAB, eos=EOS)
    torch.manual_seed(1)
    return drafter, target, FeatureHead.from_target(target, n_layers=layers, window=window).eval()


def test_step_by_step_with_the_cache_equals_one_pass_and_the_window_bounds_what_it_reads():
    _, _, head = pair_and_head(window=4, layers=2)
    f, x = torch.randn(1, 10, D), torch.randint(0, VOCAB, (1, 10))  # [1, T, d], [1, T]
    with torch.no_grad():
        whole, _ = head(f, x)  # [1, 10, d]
        past, steps = None, []
        for t in range(10):
            y, past = head(f[:, t:t + 1], x[:, t:t + 1], past)
            steps.append(y)
        f2 = f.clone()
        f2[0, 0] += 5.0  # position 0 is out of every window from position 4 on... with 2 layers, from position 7 on
        moved, _ = head(f2, x)
    assert torch.allclose(torch.cat(steps, dim=1), whole, atol=1e-5)
    assert not torch.allclose(moved[0, 3], whole[0, 3]) and torch.allclose(moved[0, 7:], whole[0, 7:], atol=1e-6)


def test_it_reads_the_feature_behind_the_newest_token():
    """An echo head (its layer silent, fc passing the feature through) drafts lm_head(f_{L-2}): the token that
    feature gave, i.e. the newest committed token; so the feature the target sends lands at the right position."""
    drafter, target, head = pair_and_head()
    with torch.no_grad():
        head.fc.weight.zero_()
        head.fc.weight[:, :D] = torch.eye(D)
        for layer in head.layers:
            layer.o.weight.zero_()
            layer.down.weight.zero_()
    prompt = [3, 4, 5, 6]
    seq = prompt + greedy_reference(target, prompt, 6)
    with torch.no_grad():
        h = target(torch.tensor([seq]), output_hidden_states=True).hidden_states[-1][0]  # [L, d] post-norm
    d = FeatureDraftSession(drafter, seq[:7], head)
    d.take_features(h[4:6])  # the features at positions 4 and 5 (position 6, the newest token, has none yet)
    assert set(d.feats) == {4, 5}
    draft = d.draft(3)
    assert draft.tokens[0] == seq[6] and draft.hidden.shape == (3, D) and d.hidden_size == D
    d.commit(draft.tokens[:1] + [9])  # one accepted, then the target's token: features past position 7 are dropped
    assert max(d.feats) <= len(d.seq) - 2


def test_greedy_sd_with_the_head_is_the_target_s_output_whatever_the_head():
    drafter, target, head = pair_and_head()
    prompt = [3, 4, 5]
    ref = greedy_reference(target, prompt, 30)
    for k in (1, 4, 8):
        out = speculative_generate(drafter, target, prompt, max_new_tokens=30, draft_len=k,
                                   make_draft=lambda s: FeatureDraftSession(drafter, s, head))
        assert out.tokens == ref


def test_a_saved_head_loads_to_the_same_drafts(tmp_path):
    drafter, _, head = pair_and_head()
    save_head(head, tmp_path, {"note": "test"})
    again = load_head(tmp_path)
    a = FeatureDraftSession(drafter, [3, 4, 5], head).draft(5)
    b = FeatureDraftSession(drafter, [3, 4, 5], again).draft(5)
    assert a.tokens == b.tokens and torch.equal(a.hidden, b.hidden)
