"""The simulator's draft window over a CSI trace: ``--draft-lens auto`` against every fixed K and the per-state oracle.

Greedy acceptance needs no speculative loop per K.  The output is the target's greedy output ``y`` whatever the
window, and a block drafted from prefix ``L`` is accepted up to the drafter's first greedy disagreement with ``y``
after ``L`` (while it agrees, the drafter's context is ``y`` itself).  So one target greedy run and one drafter pass
over ``y`` per prompt (a ``MatchProfile``: does the drafter's greedy token equal ``y[j]``, and its max probability
there) replay the rounds of any window policy exactly: fixed K (checked against the speculative loop's own rounds
in the tests), ``auto`` (wisv.timing.window under the CSI in force at each round's start, timed by the latency
model) and the oracle (the best fixed K of each link state, from constant-link replays, applied in that state).

``auto`` ends a block early or late on the drafter's confidence (its look-ahead).  Past the block's first
disagreement the drafter's own tokens are not in the profile, so the confidences it sees there are those of the
target's path: an approximation that can change only how many rejected tokens it drafts; ``auto-plan`` (the
window chosen before drafting, no look-ahead) replays exactly.  For fh/sh (lossless, ``--head none``) a block is
charged one greedy mismatch when it has a rejection (the decision head's and SH's query cost): the drafter's tokens
past the first mismatch are not profiled, so later mismatches are not counted.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch

from channel.csi import CSI
from wisv.timing.protodesc import ProtocolDesc, describe
from wisv.timing.roundtime import Deployment, RoundInputs, round_time_s
from wisv.timing.window import WindowTracker

AUTO_POLICIES = ("auto", "auto-plan", "auto-extend")  # confidence may end a block early; no confidence; may also extend


@dataclass(frozen=True)
class MatchProfile:
    """One prompt's target greedy output and where the drafter agrees with it."""

    prompt_id: str
    prompt_len: int  # tokens
    match: tuple[bool, ...]  # [n] the drafter's greedy token after prefix + y[:j] equals y[j]
    conf: tuple[float, ...]  # [n] the drafter's max probability there
    eos_end: bool  # y ends with EOS (else it was cut at the budget)

    @property
    def n(self) -> int:
        return len(self.match)


def match_profile(drafter, target, prompt_id: str, prompt_ids: list[int], max_new_tokens: int,
                  eos_token_id: int | None) -> MatchProfile:
    """Target greedy decoding of the prompt (to EOS or the budget), then one drafter pass over prompt + output."""
    from wisv.decoding.speculative import speculative_generate
    y = speculative_generate(drafter, target, prompt_ids, max_new_tokens=max_new_tokens, draft_len=8,
                             eos_token_id=eos_token_id).tokens  # greedy: the target's own output
    ids = torch.tensor([list(prompt_ids) + y[:-1]])  # [1, P + n - 1]
    with torch.no_grad():
        logits = drafter(ids).logits[0, len(prompt_ids) - 1:].float()  # [n, V]: position j predicts y[j]
    p = torch.softmax(logits, -1)
    match = (logits.argmax(-1) == torch.tensor(y)).tolist()
    return MatchProfile(prompt_id, len(prompt_ids), tuple(bool(m) for m in match),
                        tuple(float(c) for c in p.max(-1).values), bool(y) and y[-1] == eos_token_id)


def run_length(match: tuple[bool, ...], start: int, k: int) -> int:
    """Accepted tokens of a k-token block drafted at output position ``start``."""
    a = 0
    while a < k and start + a < len(match) and match[start + a]:
        a += 1
    return a


# A policy: (profile, output position L, prefix length, budget left, CSI) -> (window chosen, most tokens the block
# may hold, the look-ahead stop rule or None)
Policy = Callable[[MatchProfile, int, int, int, CSI], tuple[int, int, Callable[[float, int], bool] | None]]


def replay(profile: MatchProfile, policy: Policy, protocol: str, csi_at: Callable[[float], CSI], dep: Deployment,
           t0_s: float, max_new_tokens: int, on_verdict: Callable[[int, int, list[float]], None] | None = None,
           memo: dict | None = None) -> list[dict]:
    """The rounds of one prompt under ``policy`` (pure given the policy): one dict per round with drafted, accepted,
    committed, prefix_len, window_k, t_start_s, t_round_s (latency model, CSI at the round's start)."""
    memo = {} if memo is None else memo
    rows, L, t = [], 0, t0_s
    while L < profile.n:
        csi = csi_at(t)
        budget = max_new_tokens - L
        window, most, stop = policy(profile, L, profile.prompt_len + L, budget, csi)
        cap = max(0, min(most, budget - 1))  # 0: a 1-token budget left (the bonus token alone), timed as K = 1
        drafted = cap
        if stop is not None:  # the look-ahead: the drafter's confidence of each token after the first
            for j in range(1, cap):
                c = profile.conf[min(L + j, profile.n - 1)]
                if stop(c, j):
                    drafted = j
                    break
        a = run_length(profile.match, L, drafted)
        m = int(a < drafted)  # fh/sh: the block's greedy mismatches, at least the first (the rest are not profiled)
        key = (max(1, drafted), profile.prompt_len + L, m, csi)
        if key not in memo:
            memo[key] = round_time_s(RoundInputs(protocol, k=key[0], l=profile.prompt_len + L, m=m), csi, dep)
        committed = min(a + 1, profile.n - L)
        rows.append({"prompt_id": profile.prompt_id, "round": len(rows), "drafted": drafted, "accepted": a,
                     "committed": committed, "prefix_len": profile.prompt_len + L, "window_k": window,
                     "t_start_s": t - t0_s, "t_round_s": memo[key], "rtt_ms": csi.rtt_ms,
                     "rate_up_mbps": csi.rate_up_mbps})
        if on_verdict is not None:
            on_verdict(drafted, a, list(profile.conf[L:L + drafted]))
        L += committed
        t += memo[key]
    return rows


def fixed(k: int) -> Policy:
    return lambda prof, L, prefix, budget, csi: (k, k, None)


def by_state(table: dict[CSI, int], default: int) -> Policy:
    """The oracle: the best fixed K of the CSI in force."""
    def policy(prof, L, prefix, budget, csi):
        k = table.get(csi, default)
        return k, k, None
    return policy


def auto(tracker: WindowTracker, protocol: str, dep: Deployment, variant: str = "auto") -> Policy:
    """wisv.timing.window under the CSI in force, the round cost from the latency model; ``variant`` one of
    AUTO_POLICIES: the live UE's (the window, ended early on low confidence), the window alone, or a window that the
    confidence may also extend up to the tracker's k_max."""
    def policy(prof: MatchProfile, L: int, prefix: int, budget: int, csi: CSI):
        round_s = lambda k: round_time_s(RoundInputs(protocol, k=k, l=prefix), csi, dep)  # noqa: E731
        choice = tracker.choose(round_s, max(1, budget - 1))
        if variant == "auto-plan":
            return choice.k, choice.k, None
        return choice.k, tracker.k_max if variant == "auto-extend" else choice.k, tracker.stop_rule(round_s)
    return policy


def run_prompts(profiles: list[MatchProfile], policy: Policy, protocol: str, csi_at, dep: Deployment,
                max_new_tokens: int, tracker: WindowTracker | None = None) -> pd.DataFrame:
    """Every prompt back to back on one clock (as testbed.simulate does); a tracker learns from every verdict."""
    rows, t, memo = [], 0.0, {}
    on_verdict = (lambda d, a, c: tracker.update(d, a, c)) if tracker is not None else None
    for prof in profiles:
        r = replay(prof, policy, protocol, csi_at, dep, t, max_new_tokens, on_verdict, memo)
        t += sum(x["t_round_s"] for x in r)
        rows += r
    return pd.DataFrame(rows)


def latency_per_prompt(rounds: pd.DataFrame) -> float:
    return float(rounds.groupby("prompt_id")["t_round_s"].sum().mean())


def compare(profiles: list[MatchProfile], protocol: str, csi_at, states: list[CSI], dep: Deployment,
            fixed_ks: list[int], max_new_tokens: int, k_max: int) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Latency per prompt over the trace of every fixed K, the per-state oracle and auto (with and without the
    look-ahead); returns (table, rounds by policy)."""
    runs = {f"K={k}": run_prompts(profiles, fixed(k), protocol, csi_at, dep, max_new_tokens) for k in fixed_ks}
    best = {}
    for csi in states:
        lat = {k: latency_per_prompt(run_prompts(profiles, fixed(k), protocol, lambda _t, c=csi: c, dep,
                                                 max_new_tokens)) for k in fixed_ks}
        best[csi] = min(lat, key=lat.get)
    runs["oracle"] = run_prompts(profiles, by_state(best, fixed_ks[0]), protocol, csi_at, dep, max_new_tokens)
    for name in AUTO_POLICIES:
        tr = WindowTracker(1, k_max)
        runs[name] = run_prompts(profiles, auto(tr, protocol, dep, name), protocol, csi_at, dep,
                                 max_new_tokens, tr)
    fixed_best = min((latency_per_prompt(runs[f"K={k}"]), k) for k in fixed_ks)
    rows = []
    for name, r in runs.items():
        lat = latency_per_prompt(r)
        rows.append({"protocol": protocol, "policy": name, "latency_s": lat, "aal": r["accepted"].sum() / len(r),
                     "rounds_per_prompt": len(r) / r["prompt_id"].nunique(), "mean_drafted": r["drafted"].mean(),
                     "vs_best_fixed_pct": 100 * (lat / fixed_best[0] - 1),
                     "vs_oracle_pct": 100 * (lat / latency_per_prompt(runs["oracle"]) - 1)})
    table = pd.DataFrame(rows)
    table.attrs["oracle_k"] = {f"{c.rate_up_mbps:g} Mbps / {c.rtt_ms:g} ms": k for c, k in best.items()}
    return table, runs


def save_profiles(path: Path, profiles: list[MatchProfile]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([asdict(p) for p in profiles]))
    tmp.replace(path)


def load_profiles(path: Path) -> list[MatchProfile]:
    return [MatchProfile(d["prompt_id"], d["prompt_len"], tuple(d["match"]), tuple(d["conf"]), d["eos_end"])
            for d in json.loads(path.read_text())]


def profiles_for(cfg, pair, cache_dir: Path) -> list[MatchProfile]:
    """The prompt set's match profiles, cached beside the acceptance traces (one file per pair and prompt set)."""
    from testbed.sim.traces import TraceKey, trace_prompts
    from wisv.tasks.evaluate import eos_id
    key = TraceKey(pair.id, "greedy", 0, cfg.prompts, cfg.max_new_tokens, chat_template=cfg.chat_template,
                   prompts_file=cfg.prompts_file or "", dataset=cfg.dataset or "")
    path = cache_dir / ("profile-" + key.filename().removesuffix(".csv") + ".json")
    if path.is_file():
        return load_profiles(path)
    p = pair.get()
    rows = trace_prompts(p.tokenizer, key)
    print(f"window: profiling {len(rows)} prompts (target greedy run + one drafter pass each) ...", flush=True)
    profs = [match_profile(p.drafter, p.target, str(r["prompt_id"]), list(r["prompt_ids"]), cfg.max_new_tokens,
                           eos_id(p.target)) for r in rows]
    save_profiles(path, profs)
    return profs


def passes(profiles: list[MatchProfile], n: int) -> list[MatchProfile]:
    """The prompt set ``n`` times back to back (pass i's prompt ids end in #i)."""
    if n == 1:
        return profiles
    return [MatchProfile(f"{p.prompt_id}#{i}", p.prompt_len, p.match, p.conf, p.eos_end)
            for i in range(n) for p in profiles]


def replays_greedy(d: ProtocolDesc, head: bool) -> bool:
    """A method whose rounds a greedy match profile replays: a chain accepted greedily (greedy; fh and sh without a
    ``head``).  Sampling and trees are not; nor is ef, which without a head is greedy under another name (greedy's
    uplink, greedy's acceptance), so its rows would repeat greedy's."""
    if d.tree or d.samples:
        return False
    return d.rule == "greedy" or (d.head and not head and d.uploads_hidden)


def run_window(cfg, pair, dep: Deployment, links, head_policy, out: Path) -> pd.DataFrame:
    """``--draft-lens auto``: auto vs every fixed K of ``--window-ks`` vs the per-state oracle on each link; writes
    window.csv and window_rounds.csv, prints the table."""
    methods = [m for m in cfg.methods if replays_greedy(describe(m), head_policy is not None)]
    skipped = sorted(set(cfg.methods) - set(methods))
    if skipped:
        print(f"window: {skipped} left out of the auto comparison (it replays greedy acceptance only: reject samples, "
              "tree drafts trees, fh/sh with a head accept semantically)")
    profs = passes(profiles_for(cfg, pair, Path(cfg.cache_dir)), cfg.window_passes)
    tables, rounds = [], []
    for link in links:
        states = list(dict.fromkeys(link.states))
        for m in methods:
            table, runs = compare(profs, m, link.csi_at, states, dep, sorted(cfg.window_ks), cfg.max_new_tokens,
                                  cfg.window_k_max)
            table.insert(0, "link", link.name)
            table["oracle_k"] = json.dumps(table.attrs["oracle_k"])
            tables.append(table)
            rounds += [r.assign(link=link.name, protocol=m, policy=name) for name, r in runs.items()]
    table = pd.concat(tables, ignore_index=True)
    table.to_csv(out / "window.csv", index=False)
    pd.concat(rounds, ignore_index=True).to_csv(out / "window_rounds.csv", index=False)
    print(f"\nDraft window over the link ({len(profs)} prompts: {cfg.window_passes} pass(es) of {cfg.prompts}; "
          "latency per prompt from the latency model; oracle: the best fixed K of each link state in that state)")
    cols = ["link", "protocol", "policy", "latency_s", "aal", "mean_drafted", "vs_best_fixed_pct", "vs_oracle_pct"]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for (link, m), g in table.groupby(["link", "protocol"], sort=False):
        print(f"oracle K per state ({link}, {m}): {g['oracle_k'].iloc[0]}")
    print(f"wrote {out / 'window.csv'}, {out / 'window_rounds.csv'}")
    return table
