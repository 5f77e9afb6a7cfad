"""Speculate, or hand the round to the edge: the choice `auto` makes before each round, as pure functions.

A speculative round's predicted time per committed token is the auto window's (wisv/timing/window.py: the best K's
``T(K) / E[C(K)]``, from the measured drafting, link, edge and overhead times).  The edge generating a chunk of n
tokens alone costs ``n t_dec + T_link(n) + overhead`` for n tokens: ``t_dec`` the edge's measured decode time per
token (a CHUNK reports its passes' time; before any chunk, the edge's measured time for a one-position pass), the
link one GENERATE up and one CHUNK of n tokens down.  The chunk sizes tried are the next chunk's size, doubled up to
the budget (``chunk_sizes``): the edge takes the round with the smallest chunk that is cheaper per token than the
speculative round by a margin (the margin keeps the choice from flapping on noise), as a longer chunk spreads its round
trip over more tokens.

Before the first chunk, the edge's decode time per token is only a guess: the edge's time for a speculative round,
which passes over K + 1 positions, not one (the verify line at one position, flat at that mean until K varied), so it
errs high, the more so on a target whose pass grows with the positions (2 to 3 times the decode pass of the toy pair
on a CPU).  A guess that stays above is never corrected, since only a chunk measures it: ``should_probe`` hands one
chunk over while nothing is measured and the guess is within ``PROBE_FACTOR`` of speculation, which bounds what a
wrong probe costs to one chunk per tracker (a UE's prompts share it).

Each side's prediction is then checked against what its rounds measured (wisv/timing/check.py): the seconds a
side's rounds took, request to reply, over the seconds its predictions gave for the tokens they committed, decayed.
The ratio corrects that side's next prediction.  It catches what the terms leave out or a stale term gets wrong: an
acceptance model that undercounts a head's accepted mismatches (a chunk's agreement is greedy), a processor whose
speed drifts between the measured rounds, the edge's host time around a chunk.  Each side learns only from its own
rounds (a probe refreshes the edge's).

While the edge generates, no verdict says how often the drafter agrees.  The UE learns it anyway: the chunk's tokens
are the target's greedy output, and the drafter's own greedy choice at each of them (its pass over the chunk, which
it needs to continue) says where it would have been accepted (``agreement_history``).  So a drafter that agrees
again brings speculation back, as a better link does.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from wisv.timing.check import StopGain
from wisv.timing.window import AcceptanceHistory

HANDOVER_TOKENS = 16  # tokens the edge generates in a handed-over round, unless the budget is smaller
HANDOVER_MARGIN = 0.05  # the side not running must be this much cheaper per token (a fraction) to take the round
CHUNK_REACH = 0.10  # a hand-over asks for the smallest chunk whose cost per token is within this of the cheapest
REACH_NEAR = 1.25  # ... while speculation costs at most this factor of the cheapest chunk; beyond it, the cheapest
PROBE_FACTOR = 3.0  # before any chunk, probe the edge alone while its guessed cost is within this factor of speculation
REPROBE_ROUNDS = 32  # after this many speculative rounds with no chunk, measure the edge alone again ...
REPROBE_FACTOR = 1.5  # ... if its cost, as last measured, is within this factor of speculation
SPEC_REPROBE_TOKENS = 96  # after the edge generated this many tokens alone with no speculative round, speculate once
SPEC_REPROBE_FACTOR = 1.5  # ... if speculation's cost is within this factor of the edge's
SPEC_REPROBE_BACKOFF_MAX = 3  # each probe since speculation last won a round doubles that wait, at most this often
STOP_REPROBE_TOKENS = 64  # a lookup stop that did not pay is asked for again after the edge generated this many alone
REPLY_SHARE = 0.25  # a part of a hand-over's run is predicted to take the edge at most this share of the reply timeout


@dataclass(frozen=True)
class HandOver:
    """What ``choose_round`` decided and the two costs it compared."""

    edge_alone: bool  # True: the edge generates the round's tokens alone (no draft)
    tokens: int  # the chunk's size when handed over, tokens
    spec_s_per_token: float  # predicted seconds per committed token of the best speculative round
    edge_s_per_token: float  # predicted seconds per token of the edge generating ``tokens`` alone
    probe: bool = False  # chosen to measure a side again (``probe``, ``spec_probe``), not because it was cheaper
    spec_factor: float = 1.0  # the correction applied to speculation's predicted cost (wisv/timing/check.py)
    edge_factor: float = 1.0  # the correction applied to the edge's predicted cost
    lookup: bool = False  # the UE's prompt lookup chose, not the costs (``lookup_led``)
    stop: bool = False  # handed over: the edge ends the run where the UE's lookup agrees again (``stop_pays``)
    stop_streak: int = 0  # ... after this many tokens in a row the lookup named first


def edge_alone_s_per_token(decode_s_per_token: float, tokens: int, link_s: float, overhead_s: float = 0.0) -> float:
    """Seconds per token of a chunk of ``tokens`` the edge generates alone: its decode time per token plus the
    chunk's link time and fixed overhead spread over the tokens."""
    if tokens < 1 or decode_s_per_token < 0 or link_s < 0 or overhead_s < 0:
        raise ValueError(f"need tokens >= 1 and non-negative times, got {tokens}, {decode_s_per_token}, {link_s}, "
                         f"{overhead_s}")
    return decode_s_per_token + (link_s + overhead_s) / tokens


def max_chunk_tokens(decode_s_per_token: float, reply_within_s: float | None, share: float = REPLY_SHARE) -> int | None:
    """The largest part of a handed-over run the edge is predicted to generate within ``share`` of the UE's reply
    timeout (at least one token; None: no timeout, no bound).  A CHUNK that takes longer than the timeout never
    arrives: the UE gives up on it and asks again for the same one; so a run goes in parts of this size, each a CHUNK
    (protocols/edge_run.py)."""
    if reply_within_s is None:
        return None
    if not (reply_within_s > 0 and 0 < share <= 1 and decode_s_per_token >= 0):
        raise ValueError(f"need reply_within_s > 0, share in (0, 1] and decode_s_per_token >= 0, got "
                         f"{reply_within_s}, {share}, {decode_s_per_token}")
    if decode_s_per_token == 0:
        return None
    return max(1, int(share * reply_within_s / decode_s_per_token))


def chunk_sizes(chunk_tokens: int, budget_tokens: int) -> list[int]:
    """The chunk sizes a hand-over may ask for, smallest first: ``chunk_tokens`` doubled while below the budget, then
    the budget (at least one token)."""
    budget = max(1, budget_tokens)
    n, sizes = max(1, chunk_tokens), []
    while n < budget:
        sizes.append(n)
        n *= 2
    return sizes + [budget]


def choose_round(spec_s_per_token: float, decode_s_per_token: float, chunk_link_s: Callable[[int], float],
                 budget_tokens: int, chunk_tokens: int = HANDOVER_TOKENS, overhead_s: float | Callable[[int], float]
                 = 0.0, margin: float = HANDOVER_MARGIN, spec_factor: float = 1.0,
                 edge_factor: float = 1.0, edge_running: bool = False) -> HandOver:
    """Speculate or hand over: the edge takes the round when a chunk of one of ``chunk_sizes(chunk_tokens,
    budget_tokens)`` costs less per token than ``spec_s_per_token`` by more than ``margin``; while the edge runs
    (``edge_running``: the UE's last round was the edge's), it keeps the round unless speculation costs less than
    every chunk by more than ``margin`` (hysteresis: a near tie stays with the side running); of those, the smallest
    whose cost is within ``CHUNK_REACH`` of the cheapest (a small chunk keeps speculation's return near, a large one
    pays the round trip over more tokens: over a long RTT it asks for more), while speculation is near (at most
    ``REACH_NEAR`` times the cheapest chunk's cost); beyond, the cheapest (a return that far off is worth no round
    trip: server-only streams a prompt's tokens over one).  When none does, the round speculates
    (and the choice names the smallest chunk and its cost).  ``overhead_s``: seconds, or a chunk's tokens ->
    seconds.  ``spec_factor`` and ``edge_factor`` correct each side's predicted cost by what its rounds measured
    (``Ratio.factor``); the choice holds the corrected costs."""
    if not 0 <= margin < 1 or spec_s_per_token <= 0 or spec_factor <= 0 or edge_factor <= 0:
        raise ValueError(f"need margin in [0, 1) and spec_s_per_token and factors > 0, got {margin}, "
                         f"{spec_s_per_token}, {spec_factor}, {edge_factor}")
    over = overhead_s if callable(overhead_s) else (lambda n: overhead_s)
    sizes = chunk_sizes(chunk_tokens, budget_tokens)
    cost = {n: edge_factor * edge_alone_s_per_token(decode_s_per_token, n, chunk_link_s(n), over(n)) for n in sizes}
    spec = spec_factor * spec_s_per_token
    bar = spec / (1 - margin) if edge_running else (1 - margin) * spec
    wins = [n for n in sizes if cost[n] < bar]
    n = sizes[0]
    if wins:  # the smallest chunk within CHUNK_REACH of the cheapest: a long RTT asks for more tokens a round trip
        best = min(cost[n] for n in wins)
        reach = CHUNK_REACH if spec <= REACH_NEAR * best else 0.0
        n = next(n for n in wins if cost[n] <= (1 + reach) * best)
    return HandOver(bool(wins), n, spec, cost[n], spec_factor=spec_factor, edge_factor=edge_factor)


def should_probe(choice: HandOver, since_rounds: int | None, factor: float = PROBE_FACTOR,
                 reprobe_rounds: int = REPROBE_ROUNDS, reprobe_factor: float = REPROBE_FACTOR) -> bool:
    """Hand the round over anyway, to measure the edge alone: nothing measured it yet (``since_rounds`` None: its
    decode time is a guess that errs high) and the guessed cost of the choice's chunk is within ``factor`` of
    speculation's; or ``reprobe_rounds`` speculative rounds passed since a chunk last measured it and its cost is
    within ``reprobe_factor`` (one slow chunk, the first after drafting, must not keep the edge out for good)."""
    if factor < 1 or reprobe_factor < 1 or reprobe_rounds < 1:
        raise ValueError(f"need factors >= 1 and reprobe_rounds >= 1, got {factor}, {reprobe_factor}, "
                         f"{reprobe_rounds}")
    if choice.edge_alone:
        return False
    near = choice.edge_s_per_token / choice.spec_s_per_token
    if since_rounds is None:
        return near < factor
    return since_rounds >= reprobe_rounds and near < reprobe_factor


def probe(choice: HandOver) -> HandOver:
    """The choice, handed over to measure the edge alone."""
    return replace(choice, edge_alone=True, probe=True)


def should_speculate(choice: HandOver, edge_tokens: int, tokens: int = SPEC_REPROBE_TOKENS,
                     factor: float = SPEC_REPROBE_FACTOR) -> bool:
    """Speculate anyway, to measure speculation again: the choice hands the round over, the edge generated
    ``edge_tokens`` alone since the last speculative round, at least ``tokens``, and speculation's predicted cost is
    within ``factor`` of the edge's.  (Its terms are measured only while it runs: a cost that came out high once, a
    cold drafter or a slow minute, would otherwise keep it out for good; its check, wisv/timing/check.py, learns
    from the probe.)"""
    if tokens < 1 or factor < 1:
        raise ValueError(f"need tokens >= 1 and factor >= 1, got {tokens}, {factor}")
    return choice.edge_alone and edge_tokens >= tokens and choice.spec_s_per_token < factor * choice.edge_s_per_token


def spec_probe(choice: HandOver) -> HandOver:
    """The choice, speculating to measure speculation again."""
    return replace(choice, edge_alone=False, probe=True)


def lookup_led(choice: HandOver, stopped: bool, proposes: bool, pays: bool) -> HandOver:
    """The choice of a UE that drafts by prompt lookup, where the edge may end a run when the lookup names the tokens
    again (protocols/edge_run.py).  While the lookup ``proposes`` nothing, hand over: a round with no draft is one
    decode step that pays a round trip, which the edge's run does with none.  After a run the edge so ``stopped``,
    speculate whatever the costs said: they price the lookup at its rate over all the output, and where the output
    copies it drafts whole spans.  Else the costs' choice.  A hand-over asks for the stop when it ``pays``
    (``stop_pays``) (pure)."""
    if not proposes:
        return replace(choice, edge_alone=True, probe=False, lookup=True, stop=pays)
    if stopped:
        return replace(choice, edge_alone=False, probe=False, lookup=True)
    return replace(choice, stop=pays and choice.edge_alone)


def stop_pays(gain: StopGain, handback_s: float, edge_s_per_token: float, unstopped_tokens: int = 0,
              reprobe_tokens: int = STOP_REPROBE_TOKENS) -> bool:
    """Whether a run should end where the UE's lookup agrees again: the speculative round after a stop (``gain``'s
    measured seconds) and handing the tokens after it back to the edge (``handback_s``: a GENERATE's round trip
    before its run's tokens flow again) cost less than the edge takes for the tokens such a round commits (``gain``'s
    measured tokens) (pure).  Over a long round trip the hand-back eats what the lookup's spans gain.  Tried anyway
    before any was measured, and once the edge generated ``reprobe_tokens`` in runs that did not ask for it
    (``unstopped_tokens``): a stop is measured only where it is asked for, and one poor span must not keep it off for
    good.  The rounds' seconds hold the link of their time: a changed link is followed at the gain's decay."""
    if reprobe_tokens < 1:
        raise ValueError(f"need reprobe_tokens >= 1, got {reprobe_tokens}")
    if gain.mean_tokens is None or unstopped_tokens >= reprobe_tokens:
        return True
    return gain.mean_s + handback_s < gain.mean_tokens * edge_s_per_token


def spec_reprobe_tokens(backoff: int) -> int:
    """The edge's tokens alone before speculation is probed again, after ``backoff`` probes since it last won a
    round: ``SPEC_REPROBE_TOKENS`` doubled per probe, up to ``SPEC_REPROBE_BACKOFF_MAX`` times (pure).  Where
    speculation stays dearer (a CPU edge, on which its verify pass costs more than the tokens it brings), each probe
    is a round lost; the doubling keeps their share of the output falling."""
    return SPEC_REPROBE_TOKENS << min(max(0, backoff), SPEC_REPROBE_BACKOFF_MAX)


def next_backoff(backoff: int, choice: HandOver) -> int:
    """The probes since speculation last won a round, after the round ``choice`` made: one more after a speculation
    probe, none after a round speculation won, unchanged after the edge's or one the lookup led (pure)."""
    if choice.edge_alone or choice.lookup:
        return backoff
    return backoff + 1 if choice.probe else 0


def agreement_history(h: AcceptanceHistory, agree: Sequence[bool]) -> AcceptanceHistory:
    """The acceptance history after a chunk the edge generated: at each of its tokens, whether the drafter's greedy
    choice was that token.  Greedy verification would have accepted every agreeing token and stopped at each
    disagreement, so an agreement counts as an accepted token and a disagreement as a rejection; the counts before
    decay once, as after a verdict."""
    n_agree = sum(bool(a) for a in agree)
    return AcceptanceHistory(h.decay * h.accepted + n_agree, h.decay * h.rejected + len(agree) - n_agree,
                             h.bin_accepted, h.bin_decided, h.prior_alpha, h.prior_tokens, h.decay)
