"""The EAGLE-style feature head and its DraftSession (wisv/decoding/featdraft.py)."""
from __future__ import annotations

import json

import pytest
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
    drafter, target, head = pair_and_head()
    save_head(head, tmp_path / "a", {"note": "test"}, base=target)  # base shares the embedding: it stays out
    assert json.loads((tmp_path / "a" / "head.json").read_text())["frozen"]["embedding"] == "the drafter's"
    once = load_head(tmp_path / "a", target)
    save_head(once, tmp_path / "b", base=target)
    twice = load_head(tmp_path / "b", target)  # float16 on disk: a second round trip changes nothing
    a, b = (FeatureDraftSession(drafter, [3, 4, 5], h).draft(5) for h in (once, twice))
    assert a.tokens == b.tokens and torch.equal(a.hidden, b.hidden)
    c = FeatureDraftSession(drafter, [3, 4, 5], head).draft(5)
    assert torch.allclose(a.hidden[:1], c.hidden[:1], atol=2e-2)  # the trained weights, to float16
    assert torch.equal(once.embed.weight, target.get_input_embeddings().weight)


def test_a_slim_head_needs_the_drafter_it_was_trained_beside(tmp_path):
    drafter, target, head = pair_and_head()
    save_head(head, tmp_path / "slim", base=target)
    save_head(head, tmp_path / "whole")  # no base: the embedding is kept
    slim, whole = (sum(v.numel() for v in torch.load(tmp_path / n / "head.pt").values()) for n in ("slim", "whole"))
    assert whole - slim == VOCAB * D
    with pytest.raises(ValueError, match="takes its embedding"):
        load_head(tmp_path / "slim")
    with pytest.raises(ValueError, match="another embedding"):
        load_head(tmp_path / "slim", drafter)  # a noisy copy: not the embedding it was trained beside
    assert torch.equal(load_head(tmp_path / "whole").embed.weight, load_head(tmp_path / "slim", target).embed.weight)


def test_a_tied_lm_head_is_the_embedding_itself(tmp_path):
    _, target, head = pair_and_head()
    with torch.no_grad():
        head.lm_head.weight.copy_(head.embed.weight)
    save_head(head, tmp_path, base=target)
    assert set(torch.load(tmp_path / "head.pt")) & {"embed.weight", "lm_head.weight"} == set()
    back = load_head(tmp_path, target)
    assert back.lm_head.weight.data_ptr() == back.embed.weight.data_ptr()
    with pytest.raises(FileNotFoundError, match="not a feature head"):
        load_head(tmp_path / "nowhere", target)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: the head follows its drafter there")
def test_a_head_loaded_beside_a_drafter_on_the_gpu_drafts_there(tmp_path):
    drafter, target, head = pair_and_head()
    save_head(head, tmp_path, base=target)
    drafter, target = drafter.cuda(), target.cuda()
    back = load_head(tmp_path, target)
    assert back.embed.weight.is_cuda
    prompt = [3, 4, 5]
    out = speculative_generate(drafter, target, prompt, max_new_tokens=20, draft_len=4,
                               make_draft=lambda s: FeatureDraftSession(drafter, s, back))
    assert out.tokens == greedy_reference(target, prompt, 20)


def test_drafting_reads_tokens_through_the_drafters_restricted_head_where_it_is_the_targets_rows():
    import copy

    from wisv.decoding.featdraft import draft_lm_head
    from wisv.models.restricted_head import RestrictedHead, restrict
    drafter, target, head = pair_and_head()
    with torch.no_grad():  # a head trained beside a target whose LM head is its embedding (SmolLM2)
        head.lm_head.weight.copy_(target.get_input_embeddings().weight)
    early = copy.deepcopy(target)  # an early-exit drafter: the target's embedding and LM head rows
    early.get_output_embeddings().weight.data.copy_(target.get_input_embeddings().weight)
    kept = list(range(0, VOCAB, 2))
    restrict(early, kept)
    assert isinstance(draft_lm_head(head, early), RestrictedHead)
    assert draft_lm_head(head, drafter) is head.lm_head  # a full head: the head's own
    restrict(drafter, kept)  # restricted, but other rows (a noisy copy): the head's own
    assert draft_lm_head(head, drafter) is head.lm_head
    d = FeatureDraftSession(early, [3, 4, 5], head).draft(6)
    assert d.tokens and all(t in kept for t in d.tokens)
    prompt = [3, 4, 5]
    out = speculative_generate(early, target, prompt, max_new_tokens=20, draft_len=4,
                               make_draft=lambda s: FeatureDraftSession(early, s, head))
    assert out.tokens == greedy_reference(target, prompt, 20)


@pytest.mark.parametrize("window, k", [(16, 1), (16, 4), (6, 8), (64, 8)])
def test_the_kept_cache_drafts_what_a_recompute_over_the_window_drafts_and_feeds_far_fewer_positions(window, k):
    drafter, target, head = pair_and_head(window=window)
    fed = {True: 0, False: 0}
    runs = {}
    for keep in (True, False):
        hook = head.fc.register_forward_hook(lambda m, a, o, keep=keep: fed.__setitem__(keep, fed[keep] + o.shape[1]))
        runs[keep] = speculative_generate(drafter, target, [3, 4, 5], max_new_tokens=48, draft_len=k,
                                          make_draft=lambda s, keep=keep: FeatureDraftSession(drafter, s, head,
                                                                                              cache_rounds=keep))
        hook.remove()
    assert [r.draft_tokens for r in runs[True].rounds] == [r.draft_tokens for r in runs[False].rounds]
    assert runs[True].tokens == runs[False].tokens == greedy_reference(target, [3, 4, 5], 48)
    assert fed[True] < fed[False] or window <= k  # a small window re-reads little anyway
    # each block feeds its new committed positions (one, two when all were accepted) and its tokens but the last;
    # the second block alone reads its window again (the first one's first position had no feature before it)
    assert fed[True] <= sum(r.drafted + 1 for r in runs[True].rounds) + window


def test_the_kept_cache_is_dropped_where_the_window_recompute_would_read_other_positions():
    drafter, target, head = pair_and_head(window=16)
    d = FeatureDraftSession(drafter, [3, 4, 5], head)
    first = d.draft(4)
    assert d.kv is not None and d.fed_end == 2 + 3  # the prompt's last position, then three drafted tokens fed
    d.commit(first.tokens[:2] + [7])  # two accepted, then a correction
    assert d.kv_end == 4  # up to the second accepted token
    f, x, past = d._inputs()  # the first block's first position had no feature before it: a recompute leaves it out
    assert past is None and x.shape[1] == 3
    d.draft(4)
    d.commit([9])  # none accepted: the correction only
    d.take_features(torch.ones(1, D))
    f, x, past = d._inputs()
    assert past is not None and x.shape[1] == 1 and x[0, 0].item() == 9


def test_a_deeper_head_with_the_kept_cache_stays_lossless():
    drafter, target, head = pair_and_head(window=8, layers=2)
    out = speculative_generate(drafter, target, [3, 4, 5], max_new_tokens=40, draft_len=4,
                               make_draft=lambda s: FeatureDraftSession(drafter, s, head))
    assert out.tokens == greedy_reference(target, [3, 4, 5], 40)


def test_more_feature_rows_bring_the_target_s_features_at_every_committed_position():
    drafter, target, head = pair_and_head(window=16)
    got = []

    class Recording(FeatureDraftSession):
        def take_features(self, f):
            got.append(f.shape[0])
            super().take_features(f)

    out = speculative_generate(drafter, target, [3, 4, 5], max_new_tokens=30, draft_len=4,
                               make_draft=lambda s: Recording(drafter, s, head, feature_rows=5))
    assert out.tokens == greedy_reference(target, [3, 4, 5], 30)
    assert got == [min(5, r.accepted + 1) for r in out.rounds]  # every committed position's, the round's first too
    recomputed = speculative_generate(drafter, target, [3, 4, 5], max_new_tokens=30, draft_len=4, make_draft=lambda s:
                                      FeatureDraftSession(drafter, s, head, feature_rows=5, cache_rounds=False))
    # the kept cache gives up the positions fed with the head's own features once the target's arrive
    assert [r.draft_tokens for r in out.rounds] == [r.draft_tokens for r in recomputed.rounds]
    with pytest.raises(ValueError, match="feature_rows must be >= 1"):
        FeatureDraftSession(drafter, [3], head, feature_rows=0)


def test_with_more_rows_the_kept_cache_gives_up_what_the_targets_features_replace():
    """Driven by hand (the random pair accepts nothing): blocks accepted in part or whole, the target's features for
    every committed position; the kept cache drafts what a recompute drafts."""
    drafter, target, head = pair_and_head(window=8)
    keep, redo = (FeatureDraftSession(drafter, [3, 4, 5], head, feature_rows=5, cache_rounds=c) for c in (True, False))
    gen = torch.Generator().manual_seed(0)
    for a in (4, 2, 0, 4, 3, 1, 4, 4, 0, 2):
        blocks = [s.draft(4) for s in (keep, redo)]
        assert blocks[0].tokens == blocks[1].tokens and torch.allclose(blocks[0].hidden, blocks[1].hidden, atol=1e-5)
        committed = blocks[0].tokens[:a] + [int(torch.randint(0, VOCAB - 1, (1,), generator=gen))]
        rows = torch.randn(min(5, a + 1), D, generator=gen)
        for s in (keep, redo):
            s.commit(committed)
            s.take_features(rows)
        assert keep.kv is None or keep.kv_end <= len(keep.seq) - 1 - rows.shape[0]


def test_a_float16_drafter_keeps_its_restricted_head_under_the_feature_head_and_stays_lossless(tmp_path):
    """The drafter cast to float16 after the head loads (load_with_head): the head still reads tokens through the
    drafter's restricted head (its rows compared in float16), and greedy SD still gives the target's output."""
    import copy

    from wisv.decoding.featdraft import draft_lm_head, load_with_head
    from wisv.models.restricted_head import RestrictedHead, restrict, save_model
    _, target, head = pair_and_head()
    with torch.no_grad():
        head.lm_head.weight.copy_(target.get_input_embeddings().weight)
    early = copy.deepcopy(target)
    early.get_output_embeddings().weight.data.copy_(target.get_input_embeddings().weight)
    restrict(early, list(range(0, VOCAB, 2)))
    save_model(early, tmp_path / "drafter")
    save_head(head, tmp_path / "head", base=early)
    drafter, back = load_with_head(tmp_path / "drafter", "cpu", torch.float16, tmp_path / "head")
    assert drafter.dtype == torch.float16 and back.embed.weight.dtype == torch.float32
    lm = draft_lm_head(back, drafter)
    assert isinstance(lm, RestrictedHead) and lm.weight.dtype == torch.float16
    prompt, ref = [3, 4, 5], greedy_reference(target, [3, 4, 5], 20)
    for make in (None, lambda s: FeatureDraftSession(drafter, s, back)):
        out = speculative_generate(drafter, target, prompt, max_new_tokens=20, draft_len=4, make_draft=make)
        assert out.tokens == ref
    plain, none = load_with_head(tmp_path / "drafter", "cpu", torch.float16, None)
    assert plain.dtype == torch.float16 and none is None
    with pytest.raises(ValueError, match="must be float32 while the head loads"):
        load_head(tmp_path / "head", plain)
