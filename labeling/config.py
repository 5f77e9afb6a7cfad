"""Config dataclasses of the labeling stages; each stage saves its resolved config in the run directory."""
from __future__ import annotations

from dataclasses import dataclass, field

from wisv.head.judges import LINK_BITS
from wisv.pairs import PAIR_NAMES
from wisv.tasks.prompts import CHAT_TEMPLATE_MODES
from wisv.timing.protodesc import round_names

LABEL_ENGINES = ("cached", "batched")  # label stage: how the forced continuations run (labeling/label.py)
VARIANTS = ("csi", "nocsi")  # the trained heads: relabeled with CSI, and the no-CSI ablation


def parse_channels(specs: list[str]) -> dict[str, tuple[float, float]]:
    """['good=500/5', 'poor=2/50'] -> {'good': (500.0, 5.0), 'poor': (2.0, 50.0)}."""
    out = {}
    for s in specs:
        try:
            name, rest = s.split("=")
            rate, rtt = rest.split("/")
            out[name] = (float(rate), float(rtt))
        except ValueError:
            raise ValueError(f"--channels: bad entry {s!r}; use NAME=RATE_MBPS/RTT_MS") from None
    return out


def format_channels(channels: dict[str, tuple[float, float]]) -> list[str]:
    """The inverse of parse_channels."""
    return [f"{name}={rate!r}/{rtt!r}" for name, (rate, rtt) in channels.items()]


CHANNELS = {"good": (500.0, 5.0), "poor": (2.0, 50.0)}  # evaluate's default regimes: name -> (Mbit/s, RTT ms)
CHANNELS_TEXT = {"parse": parse_channels, "format": format_channels}  # --channels good=500/5 poor=2/50


@dataclass
class CollectConfig:
    """Stage 1: greedy SD traces on calibration prompts."""

    run_dir: str = "runs/labeling"  # where every stage reads and writes
    pair: str | None = field(default=None, metadata={
        "choices": PAIR_NAMES})  # named pair (python -m wisv.pairs build NAME; a plugin's); --drafter/--target win
    drafter: str | None = None  # drafter model dir (None: built-in toy drafter)
    target: str | None = None  # target model dir (None: built-in toy target)
    prompts_file: str | None = None  # JSONL with prompt/answer rows (None: the toy calib split)
    dataset: str | None = None  # a named set instead (spec-bench[:CATEGORY,...] | mt-bench | gsm8k | custom:FILE;
    #   docs/datasets.md): its questions' first turns, the first --prompts past --skip-prompts
    prompts: int = 600  # number of calibration prompts
    skip_prompts: int = field(default=0, metadata={  # leave out the file's first this many rows (a second run
        "min": 0})  # goes on where an earlier one stopped)
    kinds: tuple[str, ...] = ()  # only the rows of these kinds (a prompts file's "kind"; empty: every row)
    chat_template: str = field(default="auto", metadata={
        "choices": CHAT_TEMPLATE_MODES})  # prompt text through the tokenizer's chat template (auto: if it has one)
    draft_len: int = 16  # K of the greedy SD run that finds the mismatches
    max_new_tokens: int = 160  # generation budget per prompt, tokens
    hidden_layer: int = -1  # hidden-state layer recorded for the head (-1: final, post-norm)
    workers: int = 1  # processes, one torch thread and one copy of the pair each (2: both cores of a 2-core machine)
    device: str = "cpu"  # torch device
    sibling: bool = False  # record the sibling branch's edge features (sib_*: one more pass per mismatch round)


@dataclass
class LabelConfig:
    """Stage 2: base labels (force the draft token, let the target finish: harmful, helpful, changed)."""

    run_dir: str = "runs/labeling"  # where every stage reads and writes
    checker: str = "wisv.tasks.qa:check_answer"  # task outcome checker module:function(text, answer) -> bool
    settled: str = "auto"  # outcome-known prefix test module:function (auto: the QA checker's; none: roll out all)
    engine: str = field(  # forced continuations: cached (each episode's KV cache reused)
        default="cached", metadata={"choices": LABEL_ENGINES})  # or batched (prompt + prefix re-prefilled per mismatch)
    batch: int = field(default=32, metadata={"min": 1})  # continuations generated together (left-padded batch)
    fluency_window: int = field(  # tokens from the mismatch on whose perplexity ratio
        default=8, metadata={"min": 1})  # decides "disfluent"
    max_ppl_ratio: float = 2.0  # harmful if the forced tokens' perplexity exceeds this times the target's own
    limit: int | None = None  # label at most N mismatches, every k-th in trace order (spread over episodes); None: all
    threads: int = 2  # torch threads of the batched continuations and scoring (2: both cores of a 2-core machine)
    device: str = "cpu"  # torch device


@dataclass
class RelabelConfig:
    """Stage 3: CSI-aware budgeted relabeling (eqs. 28-31) and the no-CSI ablation."""

    run_dir: str = "runs/labeling"  # where every stage reads and writes
    lam: float = 0.1  # lambda of eq. 28: decay of a critical mismatch's influence per token of distance
    support_min: float = 0.2  # repair candidates: s_j >= support_min (1.0: only critical mismatches, SPEC's a <= y)
    m_csi: int = 8  # CSI realisations sampled per episode
    rate_mbps: tuple[float, float] = (1.0, 1000.0)  # rates drawn log-uniformly in [lo, hi], Mbit/s (each direction)
    rtt_ms: tuple[float, float] = (1.0, 100.0)  # RTT drawn uniformly in [lo, hi], ms
    per: tuple[float, float] = (0.0, 0.05)  # PER drawn uniformly in [lo, hi] (each direction)
    budget_min: float = 0.1  # B(q) = n_cand * (budget_min + (1 - budget_min) * q ** budget_gamma)
    budget_gamma: float = 2.0  # curvature of the budget in q (2: poor links relax critical mismatches too)
    temperature: float = 0.1  # T of eq. 31: smoothness of the repair policy
    no_csi_rate_mbps: float = 100.0  # constant CSI of the no-CSI ablation: rate (both directions), Mbit/s
    no_csi_rtt_ms: float = 10.0  # constant CSI of the no-CSI ablation: RTT, ms
    seed: int = 0  # RNG seed of the CSI and action samples


@dataclass
class TrainConfig:
    """Stage 4: train the decision head with BCE, class balancing and weight decay."""

    run_dir: str = "runs/labeling"  # where every stage reads and writes
    variant: str = field(default="csi", metadata={"choices": VARIANTS})  # csi: relabeled instances; nocsi: ablation
    hidden: int = 256  # MLP hidden width H
    dropout: float = 0.3  # dropout between the layers
    lr: float = 1e-3  # AdamW learning rate
    weight_decay: float = 0.05  # AdamW weight decay
    epochs: int = 30  # passes over the training instances
    batch: int = 512  # minibatch size
    val_frac: float = 0.2  # fraction of *episodes* held out for validation
    seed: int = 0  # init, shuffling and split seed


@dataclass
class EvalConfig:
    """Stage 5: speculative decoding with the head on the held-out test split, tau x channel sweep."""

    run_dir: str = "runs/labeling"  # where every stage reads and writes
    pair: str | None = field(default=None, metadata={
        "choices": PAIR_NAMES})  # named pair (python -m wisv.pairs build NAME; a plugin's); --drafter/--target win
    drafter: str | None = None  # drafter model dir (None: the collect stage's drafter)
    target: str | None = None  # target model dir (None: the collect stage's target)
    prompts_file: str | None = None  # JSONL test prompts (None: the toy test split)
    dataset: str | None = None  # a named set instead (as collect's --dataset); the rows collect took are left out
    prompts: int = 200  # test prompts
    chat_template: str = field(default="auto", metadata={
        "choices": CHAT_TEMPLATE_MODES})  # prompt text through the tokenizer's chat template (auto: if it has one)
    draft_len: int = 16  # K, draft tokens per round
    taus: tuple[float, ...] = (
        0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # thresholds swept (greedy = tau 0 always runs)
    channels: dict[str, tuple[float, float]] = field(
        default_factory=lambda: dict(CHANNELS), metadata=CHANNELS_TEXT)  # regimes NAME=RATE/RTT, Mbit/s and ms
    variants: tuple[str, ...] = field(default=VARIANTS, metadata={"choices": VARIANTS})  # trained heads to evaluate
    max_acc_drop_pts: float = 1.0  # tau choice: largest tau whose poor-channel accuracy is within this of greedy, pts
    max_fluency_ratio: float = 1.25  # tau choice: poor-channel perplexity ratio vs the target's own text at most this
    tau_max: float = 0.5  # tau choice: at most this (0.5 is the class-balanced head's decision boundary)
    protocol: str = field(default="fh", metadata={
        "choices": round_names()})  # protocol whose payloads the predicted latency uses
    ue_profile: str = "jetson-agx-orin"  # hardware profile of the drafter (predicted latency)
    edge_profile: str = "a40"  # hardware profile of the verifier (predicted latency)
    max_new_tokens: int = 160  # generation budget per prompt, tokens
    device: str = "cpu"  # torch device


@dataclass
class JudgesConfig:
    """Stage (judges): our edge judge and the peer judges from labelled mismatches, every tau chosen on dev data."""

    run_dirs: tuple[str, ...] = ("runs/labeling",)  # run directories with collect + label (calibration pools only)
    out_dir: str = "runs/judges/heads"  # one judge directory per judge (edge, edge-blind, autojudge, ...)
    results_dir: str = "runs/judges"  # judges_sweep.csv, judges_curve.csv, judges.json and the config
    dev_every: int = field(default=5, metadata={"min": 2})  # every n-th prompt (episode) of each run dir is dev
    dev_kinds: tuple[str, ...] = field(  # leave kinds out: the prompts of these kinds are dev,
        default=())  # the rest train (overrides dev_every)
    flip_budget: float | None = field(  # tau by a bound: the upper bound on answer flips among accepted checkable dev
        default=None, metadata={"min": 0.0, "max": 1.0})  # mismatches at most this (None: the point rule)
    flip_delta: float = field(  # 1 - confidence of that bound
        default=0.1, metadata={"min": 0.0, "max": 1.0})  # (0.1: an upper 90% Clopper-Pearson bound)
    guard_top1_min: float | None = field(  # our judge never overrules a target whose top-1 probability
        default=None)  # is at least this (None: no guard)
    guard_margin_nats: float | None = field(  # nor one whose NLL margin of its token over the draft's
        default=None)  # is at least this, nats (None: off)
    guard_protect_tokens: int | None = field(  # nor any mismatch among the output's first this many tokens,
        default=None, metadata={"min": 0})  # where an answer-first reply states its answer (None: off)
    guard_protect_grid: tuple[int, ...] = field(  # choose that N, tokens, on dev among these (overrides the above;
        default=(), metadata={"min": 0})  # each N's bound at flip_delta / len(grid)): the most dev mismatches kept wins
    max_harm_frac: float = field(  # the dev rule: accepted dev mismatches
        default=0.1, metadata={"min": 0.0, "max": 1.0})  # at most this harmful
    max_wrong_frac: float = field(  # the dev rule: and at most this turning a right answer wrong
        default=0.01, metadata={"min": 0.0, "max": 1.0})  # (of those with an answer to check)
    edge_inputs: tuple[str, ...] = ("edge", "h_after")  # what our edge judge reads (edge-side only: edge, h_after)
    edge_hidden: int = field(default=0, metadata={"min": 0})  # our edge judge's MLP width (0: logistic regression)
    wrong_weight: float = field(  # our judge's training weight of a mismatch
        default=10.0, metadata={"min": 1.0})  # that turns a right answer wrong
    fly_window: int = field(  # FLy-style judge: draft tokens after the mismatch that must agree
        default=6, metadata={"min": 1})  # (FLy: min(6, K - 1))
    epochs: int = field(default=300, metadata={"min": 1})  # full-batch Adam steps per linear judge
    curve_sizes: tuple[int, ...] = (100, 400, 1600)  # training labels of the learning curve (plus all of them)
    poor_link: tuple[float, float] = (  # the poor link (Mbit/s, RTT ms):
        3.0, 45.0)  # our judge's tau at the full harm budget
    good_link: tuple[float, float] = (200.0, 5.0)  # the good link (Mbit/s, RTT ms): tau at the budget scaled by t_link
    link_bits: tuple[float, float] = LINK_BITS  # (up, down) bits of the round t_link charges (saved with the judge)
    seed: int = 0  # init and curve-subset seed


@dataclass
class AnatomyConfig:
    """Stage (anatomy): where the labelled answer flips fall (part, answer form, first sentence or after, guarded)."""

    run_dirs: tuple[str, ...] = ("runs/labeling",)  # run directories with collect + label
    results_dir: str = "runs/anatomy"  # anatomy.csv, anatomy_kinds.csv and the config
    dev_kinds: tuple[str, ...] = ()  # the prompts of these kinds are the "dev" part, the rest "train"
    guard_top1_min: float = 0.9  # the guard: the target's top-1 probability at least this rejects (1.01: never)
    guard_margin_nats: float = 4.0  # or its NLL margin over the draft's token at least this, nats (inf: never)
    delta: float = field(default=0.1, metadata={"min": 0.0, "max": 1.0})  # 1 - confidence of each cell's flip bound
