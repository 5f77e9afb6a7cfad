"""Prompt lookup (wisv/decoding/ngram.py): vLLM's proposal rule on hand-built contexts, and lossless greedy SD with a
drafter that has no model."""
import pytest
import torch

from tests.tiny_pair import make_pair
from wisv.decoding.lossless import check_lossless
from wisv.decoding.ngram import NgramConfig, NgramDraftSession, match, propose
from wisv.decoding.speculative import speculative_generate
from wisv.tasks.evaluate import greedy_reference


@pytest.mark.parametrize("context, cfg, expected", [
    ([1, 2, 3, 4, 2, 3], (2, 3, 4), [4, 2, 3]),  # vLLM's docstring example: [4, 2, 3] cannot match, [2, 3] does
    ([1, 2, 3, 4, 2, 3], (3, 3, 4), []),  # only trigrams: none matches
    ([1, 2, 3, 4, 1, 2, 3], (2, 3, 4), [4, 1, 2, 3]),  # the longest match wins ([1, 2, 3], not [2, 3])
    ([9, 5, 1, 9, 5, 2, 9, 5], (2, 2, 2), [1, 9]),  # of several occurrences, the earliest
    ([7, 7, 7, 7], (1, 3, 5), [7]),  # the matched n-gram may overlap the suffix; the draft stops at the context's end
    ([1, 2, 3, 1, 2, 3, 1, 2], (1, 2, 3), [3, 1, 2]),  # k caps the proposal
    ([5], (1, 2, 3), []),  # too short to hold a match
    ([1, 2, 3, 4, 5], (1, 2, 3), []),  # nothing repeats
])
def test_propose_follows_vllms_rule(context, cfg, expected):
    assert propose(context, NgramConfig(*cfg)) == expected


def test_match_reports_length_and_start():
    assert match([1, 2, 3, 4, 1, 2, 3], 1, 5) == (3, 3)
    assert match([1, 2, 3], 1, 5) == (0, -1)


def test_propose_takes_a_smaller_k():
    assert propose([1, 2, 3, 1, 2], NgramConfig(1, 2, 10), k=1) == [3]
    assert propose([1, 2, 3, 1, 2], NgramConfig(1, 2, 10), k=0) == []


@pytest.mark.parametrize("args", [(0, 2, 4), (3, 2, 4), (1, 2, 0)])
def test_bad_config_is_refused(args):
    with pytest.raises(ValueError, match="prompt lookup needs"):
        NgramConfig(*args)


def test_the_session_drafts_ids_only_and_cuts_at_eos():
    s = NgramDraftSession([4, 5, 6, 9, 4, 5], NgramConfig(1, 2, 5))
    d = s.draft(5, eos_token_id=9)
    assert d.tokens == [6, 9] and d.hidden is None and d.probs is None and d.features is None
    s.commit([6, 9])
    assert s.seq == [4, 5, 6, 9, 4, 5, 6, 9]
    with pytest.raises(ValueError, match="cannot sample"):
        s.draft(3, sample=True)


def test_greedy_sd_with_prompt_lookup_is_lossless_and_drafts_where_the_text_repeats():
    _, target = make_pair("llama", 32, 2, 4, 2)
    gen = torch.Generator().manual_seed(0)
    drafted = 0
    for _ in range(4):
        base = torch.randint(1, 60, (6,), generator=gen).tolist()
        prompt = base * 3  # a repeating prompt: lookup finds matches
        ref = greedy_reference(target, prompt, max_new_tokens=32)
        out = speculative_generate(None, target, prompt, max_new_tokens=32, draft_len=6,
                                   make_draft=lambda s: NgramDraftSession(s, NgramConfig(1, 3, 6)),
                                   record_edge=False)
        assert check_lossless(target, prompt, ref, out.tokens).ok
        drafted += sum(r.drafted for r in out.rounds)
        assert sum(len(r.committed) for r in out.rounds) == len(out.tokens)
    assert drafted > 0


COSTS = {1: 57.0, 2: 96.0, 3: 117.0, 4: 84.0, 5: 98.0, 6: 100.0, 7: 108.0, 8: 99.0}  # the SmolLM2 target, ms


def test_padded_ms_takes_the_cheapest_count_at_least_as_large():
    from wisv.decoding.ngram import padded_ms
    assert padded_ms(COSTS, 2) == 84.0 and padded_ms(COSTS, 1) == 57.0 and padded_ms(COSTS, 8) == 99.0
    assert padded_ms(COSTS, 16) == pytest.approx(198.0)  # past the measured counts: the largest one's cost per row


@pytest.mark.parametrize("p, n_max, expected", [
    (0.0, 7, 0),  # nothing is accepted: a plain decode step
    (0.3, 7, 0),  # 1.43 tokens for 84 ms is worse than 1 for 57
    (0.9, 7, 7),  # a sure copy: the whole proposal (5.7 tokens for 99 ms)
    (0.6, 7, 3),  # 3 tokens padded to 4 rows: 2.18 tokens for 84 ms
    (0.9, 0, 0),  # no proposal
])
def test_choose_len_trades_expected_tokens_for_the_pass_cost(p, n_max, expected):
    from wisv.decoding.ngram import choose_len
    assert choose_len(COSTS, p, n_max) == expected


def test_choose_len_without_costs_takes_the_whole_proposal():
    from wisv.decoding.ngram import choose_len
    assert choose_len(None, 0.1, 5) == 5


def test_the_session_learns_acceptance_from_commits():
    s = NgramDraftSession([1, 2, 3, 1, 2], NgramConfig(1, 2, 5))
    before = s.history.alpha
    s.draft(5)  # [3, 1, 2]
    s.commit([3, 4])  # one accepted, then a correction
    assert s.history.accepted == 1 and s.history.rejected == 1 and s.history.alpha < before


def test_costs_at_takes_the_table_measured_nearest_below_the_context():
    from wisv.decoding.ngram import costs_at
    tables = {100: {1: 57.0}, 1000: {1: 63.0}}
    assert costs_at(tables, 50) == {1: 57.0} and costs_at(tables, 999) == {1: 57.0}
    assert costs_at(tables, 1000) == {1: 63.0} and costs_at(tables, 5000) == {1: 63.0}
    with pytest.raises(ValueError, match="no pass-cost table"):
        costs_at({}, 10)


def test_a_costly_pass_table_keeps_a_weak_proposal_from_being_sent():
    s = NgramDraftSession([1, 2, 3, 1, 2], NgramConfig(1, 2, 5), {0: {1: 57.0, 2: 1000.0, 3: 1000.0, 4: 1000.0}})
    assert s.draft(5).tokens == []  # p = 0.6 cannot pay for a pass 17x a step: a plain decode step instead


def test_only_a_model_drafter_has_a_prefill_pending():
    """``prefill_pending`` (the drafting-time rules of auto and --draft-len auto read it): a model's session reads its
    prompt in its first draft; a lookup never reads ahead."""
    from wisv.decoding.sessions import DraftSession
    drafter, _ = make_pair("llama", 32, 2, 4, 2, vocab=64, eos=1)
    d = DraftSession(drafter, [3, 4, 5])
    assert d.prefill_pending
    d.draft(2)
    assert not d.prefill_pending and d.last_prefill_s > 0  # the first forward's read of the prompt, timed
    d.commit(d.drafted[:1])
    d.draft(2)
    assert d.last_prefill_s == 0.0  # no read of the prompt in a later block
    assert not NgramDraftSession([3, 4, 5]).prefill_pending and NgramDraftSession([3]).last_prefill_s == 0.0


def test_every_drafter_session_meets_the_declared_interface():
    """The UE's rounds and hand-overs call what ``Drafting`` declares: prompt lookup's session lacked ``agreement``
    and `auto --drafter ngram` failed at its first hand-over."""
    from wisv.decoding.featdraft import FeatureDraftSession
    from wisv.decoding.sessions import Drafting, DraftSession
    drafter, _ = make_pair("llama", 32, 2, 4, 2, vocab=64, eos=1)
    assert isinstance(DraftSession(drafter, [3, 4, 5]), Drafting)
    assert isinstance(NgramDraftSession([3, 4, 5]), Drafting)
    members = {m for m in Drafting.__dict__ if not m.startswith("_")} | set(Drafting.__annotations__)
    assert members <= set(dir(FeatureDraftSession)) | {"seq", "last_prefill_s"}  # those two set per instance


def test_agreement_says_where_the_lookup_would_have_proposed_the_token_and_commits_them():
    s = NgramDraftSession([1, 2, 3, 9, 1, 2], NgramConfig(1, 2, 5))
    # after [.., 1, 2] the lookup proposes 3 (agrees); after [.., 2, 3] it proposes 9, not 7; after [3, 7] nothing
    # matches: no proposal, left out
    assert s.agreement([3, 7, 5]) == [True, False]
    assert s.seq == [1, 2, 3, 9, 1, 2, 3, 7, 5] and s.drafted == []
    assert s.history.accepted == NgramDraftSession([1]).history.accepted  # its proposals' history is untouched

