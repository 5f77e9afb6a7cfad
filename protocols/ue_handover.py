"""`auto` hands a round to the edge when speculation does not pay (the UE's side; the edge's is
protocols/edge_run.py).

Before each round of a protocol that chooses (its description's ``chooses``: `auto`), the UE prices its best
speculative round with the auto window's measured terms and the edge generating a chunk alone
(wisv/timing/handover.py ``choose_round``).  A handed-over round sends GENERATE naming the round and a token budget;
the edge's target decodes that many tokens greedily (a run) and sends them in parts, each a CHUNK and a round of its
own, which the UE commits as they come (greedy output stays the target's: they are its tokens); the UE chooses again
after the run's last part.  A part is never larger than the edge is predicted to generate within a quarter of the
UE's reply timeout (``max_chunk_tokens``): each part arrives within it, so a run needs no timeout of its length and
no second round trip (a longer CHUNK would never arrive: the UE would ask for it again).  The drafter's pass over a
part says where it would have agreed, which keeps the acceptance estimate alive while nothing is drafted, and each
CHUNK's decode time is the edge's measured time per token.  That pass waits until the next round (``follow_chunk``):
after the next GENERATE is sent (or while the next part comes), while the edge generates, or before the next draft;
so the choice before a round reads the agreement up to the part before the last (a drafter that agrees again brings
speculation back one run later); a prompt's last part is followed after its last token arrived
(``UESession.follow_last``, off the prompt's latency), for the next prompt's choice.  Nothing is handed over before a
verdict measured drafting without the drafter's prefill of the prompt (a prompt's first block pays it; a drafter that
times its read of the prompt, ``last_prefill_s``, leaves the rest of that block clean drafting); until a CHUNK
measured the edge alone, one round is handed over as a probe when the guess is near enough (``should_probe``), so
that a guess that errs high does not keep the edge from ever being measured; and after the edge generated
``SPEC_REPROBE_TOKENS`` alone, one round speculates when speculation's cost is near enough (``should_speculate``), so
that a speculative cost measured high once does not keep speculation out for good; each such probe since speculation
last won a round doubles the wait before the next (``spec_reprobe_tokens``).  A UE that drafts by prompt lookup may
ask the edge to end a run where the lookup named the last tokens in a row (``lookup_stop_streak``,
protocols/edge_run.py); the lookup then leads (``lookup_led``, in place of the probes): while it proposes nothing the
edge takes the rest of the budget, after a run so stopped the UE speculates, and with a proposal in hand the costs
choose; a run asks for the stop while the rounds after the stops so far paid for their hand-back (``stop_pays``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from channel.csi import CSI
from protocols.errors import EdgeError
from protocols.typed import Chunk
from protocols.wire import Message, MsgType, make
from wisv.decoding.ngram import NgramConfig, propose
from wisv.decoding.speculative import truncate_output
from wisv.timing.check import check_round, learn_stop_gain
from wisv.timing.handover import (
    HANDOVER_TOKENS,
    HandOver,
    agreement_history,
    choose_round,
    lookup_led,
    max_chunk_tokens,
    next_backoff,
    probe,
    should_probe,
    should_speculate,
    spec_probe,
    spec_reprobe_tokens,
    stop_pays,
)
from wisv.timing.latency import t_single_exchange
from wisv.timing.window import choose_k

DECODE_SMOOTH = 0.3  # weight of the newest chunk in the edge's decode time per token


@dataclass
class EdgeRound:
    """A round the edge generated alone (a part of a handed-over run), as the UE got it."""

    index: int  # the session's round index
    protocol: str  # the session's protocol
    tokens: list[int]  # the committed tokens
    t_decode_s: float  # the edge's passes, s
    t_edge_s: float  # edge time from GENERATE (or the run's previous part) to CHUNK, s
    choice: HandOver  # what decided the run it is a part of
    drafted: int = 0  # tokens the edge drafted itself for its passes (--edge-draft; the CHUNK's count)
    accepted: int = 0  # of them, tokens committed
    stopped: bool = False  # the run ended with this part, before its tokens: the UE's prompt lookup agrees again


@dataclass
class UERun:
    """A handed-over round as the UE receives it, part by part."""

    choice: HandOver  # what decided it
    left: int  # tokens still to come
    part_tokens: int | None  # the largest part asked for (None: one part, the whole run)
    t0: float  # perf_counter when its GENERATE went out, s
    taken: int = 0  # tokens received so far


def hand_over(sess, csi_est: CSI | None) -> HandOver | None:
    """The round's choice when the session's protocol may hand rounds over and something was measured; else None."""
    w = sess.window
    if not sess.proto.desc.chooses or w.tau_d_s is None or w.tau_from_prefill:
        return None  # nothing measured yet, or only a drafting time with the drafter's prefill in it
    csi = csi_est or CSI.ideal()
    auto = sess._auto_window(csi_est)
    priced = w.round_s(auto.protocol, csi, auto.pb, auto.mismatch_rate)
    prefill = w.prefill_s if sess.d.prefill_pending else 0.0  # a prompt's first block pays the drafter's prefill
    round_s = lambda k: priced(k) + prefill  # noqa: E731  (the edge's chunks hide it: the drafter follows them)
    budget = sess.p.max_new_tokens - len(sess.tokens)
    hi = max(1, min(sess.shape.k_max(sess.p), budget - 1))
    lo = 1 if sess.p.auto_window else hi
    spec = choose_k(round_s, w.history.alpha, lo, hi).s_per_token
    decode = edge_decode_s(w)
    pb = auto.pb
    link = lambda n: t_single_exchange(pb.o_up, n * pb.b_tok + pb.o_dn, csi)  # noqa: E731  GENERATE up, CHUNK down
    lookup = sess.d.lookup if sess.p.lookup_stop_streak > 0 else None  # the edge stops its runs on it
    chunk = budget if lookup is not None else min(chunk_size(sess.edge_chunk), budget)  # a stop ends it early
    choice = choose_round(spec, decode, link, budget, chunk_tokens=chunk,
                          overhead_s=lambda n: w.overhead_s(link(n)), spec_factor=w.spec_check.factor,
                          edge_factor=w.edge_check.factor, edge_running=w.edge_running)
    if lookup is not None:
        choice = lookup_choice(sess, choice, lookup, link(1) + w.overhead_s(link(1)), decode * w.edge_check.factor)
    elif should_probe(choice, w.since_edge_rounds):
        choice = probe(choice)
    elif should_speculate(choice, w.edge_tokens_since_spec, tokens=spec_reprobe_tokens(w.spec_backoff)):
        choice = spec_probe(choice)
    if not choice.edge_alone and not choice.probe and w.since_edge_rounds is not None:
        w.since_edge_rounds += 1
    w.spec_backoff = next_backoff(w.spec_backoff, choice)
    sess.lookup_agrees = False
    return choice


def lookup_choice(sess, choice: HandOver, lookup: NgramConfig, back_s: float, edge_s: float) -> HandOver:
    """The choice of a UE that drafts by prompt lookup with the edge's stop (``lookup_led``), ``back_s`` a GENERATE's
    round trip before a run's first part, ``edge_s`` the edge's corrected time per token; a run that asks for the
    stop names its streak (``lookup_stop_streak``)."""
    w = sess.window
    pays = stop_pays(w.stop_gain, back_s, edge_s, w.unstopped_tokens)
    choice = lookup_led(choice, sess.lookup_agrees, bool(propose(sess.d.seq + sess.unfollowed, lookup, 1)), pays)
    w.unstopped_tokens = 0 if choice.stop else w.unstopped_tokens
    return replace(choice, stop_streak=sess.p.lookup_stop_streak) if choice.stop else choice


def edge_decode_s(window) -> float:
    """The edge's decode time per token as the UE knows it: measured by its CHUNKs, else guessed from its time for a
    one-position pass."""
    return window.edge_decode_s if window.edge_decode_s is not None else window.verify.predict_s(0)


def chunk_size(last_tokens: int) -> int:
    """The smallest chunk the next hand-over considers: ``HANDOVER_TOKENS`` after a speculative round, else twice
    the last chunk, so that a run of the edge's rounds pays a round trip per doubling rather than per 16 tokens (the
    choice is still made again before each of them)."""
    return HANDOVER_TOKENS if last_tokens <= 0 else 2 * last_tokens


def start_run(sess, choice: HandOver) -> None:
    """Hand the session's next round to the edge: a run of ``choice.tokens``, in parts that each arrive within the
    UE's reply timeout at the edge's measured decode time (``max_chunk_tokens``)."""
    part = run_part(max_chunk_tokens(edge_decode_s(sess.window), sess.p.reply_timeout_s), sess.p.run_part_tokens)
    sess.run = UERun(choice, choice.tokens, None if part is None or part >= choice.tokens else part,
                     time.perf_counter())


def run_part(within_timeout: int | None, asked: int | None) -> int | None:
    """A handed-over run's largest part: what arrives well within the reply timeout, at most ``asked`` (a user's
    first token comes with the run's first part) (pure; None: no bound)."""
    sizes = [n for n in (within_timeout, asked) if n is not None]
    return min(sizes) if sizes else None


def generate_message(sess) -> Message:
    """The GENERATE of the session's handed-over run from its next part on: the tokens still to come, in parts of at
    most the run's part size (sent first, and again after a timeout or a resume)."""
    run = sess.run
    parts = {} if run.part_tokens is None else {"every_tokens": run.part_tokens}
    return make(MsgType.GENERATE, sess.sid, None, round=sess.n_rounds, tokens=run.left, **parts,
                **lookup_fields(sess.d.lookup if run.choice.stop else None, run.choice.stop_streak),
                **sess.token)


def lookup_fields(lookup: NgramConfig | None, streak: int) -> dict:
    """GENERATE's lookup stop: the drafter's prompt-lookup rule and the streak that ends the run; none for a model's
    drafts or with the stop off (``streak`` 0)."""
    if lookup is None or streak <= 0:
        return {}
    return {"prompt_lookup_min": lookup.prompt_lookup_min, "prompt_lookup_max": lookup.prompt_lookup_max,
            "stop_streak": streak}


def follow_chunk(sess) -> None:
    """The drafter's pass over the last CHUNK's tokens (committed; its next draft needs them), and the agreement it
    shows: where its greedy choice was the target's token."""
    if sess.unfollowed:
        agree = sess.d.agreement(sess.unfollowed)
        sess.window.history = agreement_history(sess.window.history, agree)
        sess.unfollowed = []


def check_spec(window, choice: HandOver | None, t_round_s: float | None, tokens: int, prefilled: bool = False) -> None:
    """A speculative round, request to verdict in ``t_round_s``, committed ``tokens``: check speculation's prediction
    (uncorrected) against it, where a choice made one (auto's) and the round was no prompt's first (``prefilled``:
    the drafter's prefill is priced apart, ``WindowTracker.prefill_s``); the edge's run of tokens alone ends.  A
    round the lookup led after a stop (``lookup_led``) also teaches what a stop buys (``StopGain``)."""
    window.edge_tokens_since_spec, window.edge_running = 0, False
    if choice is not None and choice.lookup and t_round_s is not None:  # the round right after a lookup stop: what
        window.stop_gain = learn_stop_gain(window.stop_gain, tokens, t_round_s)  # the stop bought
    if choice is not None and t_round_s is not None and not prefilled:
        raw = choice.spec_s_per_token / choice.spec_factor
        window.spec_check = check_round(window.spec_check, raw, t_round_s, tokens)


def commit_chunk(sess, msg: Message) -> EdgeRound:
    """Commit a part of the handed-over run (its CHUNK) and learn the edge's decode time per token; at the run's end
    (its tokens all came, or the session ended), check the edge's predicted cost against the run's time, GENERATE to
    the last part, and choose again at the next round.  The drafter follows the part later (``follow_chunk``)."""
    run = sess.run
    if msg.type != MsgType.CHUNK or msg.header["round"] != sess.n_rounds:
        raise EdgeError(f"unexpected {msg.type.name} while waiting for the edge's round {sess.n_rounds}")
    c = Chunk.of(msg.header, msg.tensors)
    tokens = truncate_output([int(t) for t in c.tokens], min(run.left, sess.p.max_new_tokens - len(sess.tokens)),
                             sess.eos)
    w = sess.window
    per = c.t_decode_s / len(tokens)
    w.edge_decode_s = per if w.edge_decode_s is None else w.edge_decode_s + DECODE_SMOOTH * (per - w.edge_decode_s)
    w.since_edge_rounds = 0
    w.edge_tokens_since_spec += len(tokens)
    w.unstopped_tokens += 0 if run.choice.stop else len(tokens)
    w.edge_running = True
    r = EdgeRound(sess.n_rounds, sess.proto.name, tokens, c.t_decode_s, c.t_edge_s, run.choice, c.drafted,
                  c.accepted, c.stopped)
    sess.tokens.extend(tokens)
    sess.unfollowed = sess.unfollowed + tokens
    sess.n_rounds += 1
    sess.done = c.done or len(sess.tokens) >= sess.p.max_new_tokens or tokens[-1] == sess.eos
    run.left, run.taken = run.left - len(tokens), run.taken + len(tokens)
    sess.lookup_agrees = c.stopped and not sess.done
    if sess.done or run.left <= 0 or c.stopped:
        choice = run.choice
        t_run_s = time.perf_counter() - run.t0
        w.edge_check = check_round(w.edge_check, choice.edge_s_per_token / choice.edge_factor, t_run_s, run.taken)
        sess.edge_chunk, sess.run = choice.tokens, None
    return r
