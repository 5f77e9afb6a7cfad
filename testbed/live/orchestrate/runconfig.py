"""testbed.run's settings: ``RunConfig`` (the run's, with the UEs', the edge's and the link's nested), its checks,
and its flags (``parse_args``); the protocols a run runs are read off their descriptions (protocols/registry.py)."""
from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import asdict, dataclass, field

import config
from protocols.registry import ALL_PROTOCOLS, PROTOCOLS, servable, unserved
from testbed.common.heads import load_policy
from testbed.common.link import LinkSpec
from testbed.live.common.liveness import HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.ue.ueconfig import UEConfig
from wisv.models.choices import DTYPE_CHOICES
from wisv.pairs import PAIR_NAMES, apply_pair
from wisv.pairs.scorer import SCORERS
from wisv.tasks.datasets import check_dataset

PROG = "python -m testbed.run"  # as users type it: --help and error lines
SHARED = ("auth", "heartbeat_ivl_ms", "heartbeat_timeout_ms", "dtype")  # RunConfig fields given to UEs and edge alike
# UEConfig fields the run sets for each UE process
UE_SET_BY_RUN = ("connect", "prompts", "prompts_file", "out", "ue_id", "protocol", "interleave", "device", "seed",
                 "link_json",
                 "link_t0_epoch_s", "reference", "pair", "keep_done") + SHARED
EDGE_SET_BY_RUN = ("bind", "device", "max_draft_len", "max_session_tokens", "pair", "capture",
                   "capture_iface") + SHARED  # ServeConfig fields set


@dataclass
class RunConfig:
    """One testbed run (saved as config.json and config.toml next to the results); ``[ue]``, ``[edge]`` and
    ``[link]`` hold the UEs', the edge's and the link's settings, with the same flags as the top-level ones."""

    protocol: str = field(default="auto", metadata={  # protocols, in turn on the same prompts and link,
        "choices": (*PROTOCOLS, "all"), "sep": ","})  # each paired against the first (paired.csv); all: every one
    interleave: bool = False  # run the protocols prompt by prompt: each UE runs a prompt under every protocol before
    #   the next (a timed comparison: the machine's and the link's drift fall on all alike); else one after the other
    pair: str | None = field(default=None, metadata={
        "choices": PAIR_NAMES})  # named pair (python -m wisv.pairs build NAME; a plugin's); --drafter/--target win
    prompts: int = field(default=20, metadata={
        "min": 1})  # first N problems of the built-in test split (or of --prompts-file)
    prompts_file: str | None = None  # JSONL with prompt (text) or prompt_ids, optional prompt_id and answer
    dataset: str | None = None  # a named set instead: spec-bench[:CATEGORY,...] | mt-bench | gsm8k | custom:FILE
    #   (docs/datasets.md; --prompts N: its first N questions)
    first_turn_only: bool = False  # run only the first turn of a two-turn question (MT-Bench; vLLM's and SpecEdge's)
    out: str = ""  # output directory; default runs/<time>-<protocol>
    seed: int = 0  # sampling and link-loss seed (the UEs' and the link's)
    device: str = "cpu"  # torch device of both processes
    dtype: str = field(default="auto", metadata={
        "choices": DTYPE_CHOICES})  # both models' weights, and the reference's (auto: fp32 on CPU, bf16/fp16 on CUDA)
    drafter_dtype: str = field(default="same", metadata={
        "choices": ("same", *DTYPE_CHOICES)})  # the UEs' drafter weights (same: --dtype); float16 about halves a
    #   one-token drafter step on a CPU with AVX-512 (docs/pairs.md), and moves only what the drafter proposes
    ues: int = field(default=1, metadata={
        "min": 1})  # UE processes sharing the edge and the link; prompts are dealt round-robin
    reference: bool = True  # compute target-only greedy outputs for matches_target (--no-reference: skip)
    fluency_model: str = field(  # a third LM's fluency score beside the target's
        default="none", metadata={"choices": ("auto", "none", *SCORERS)})  # (docs/fluency.md; auto: where built)
    cpu_wakeup_us: int | None = field(default=None, metadata={
        "min": 0})  # hold /dev/cpu_dma_latency at this bound during the run, us (root; 0: poll)
    netns: bool = False  # edge and UEs in their own network namespaces joined by a veth (root), tc on the veth
    overwrite: bool = False  # empty a non-empty --out first (without it, a non-empty --out is refused)
    continue_dir: str | None = field(default=None, metadata={
        "flag": "continue"})  # continue the interrupted run in this directory with its config (orchestrate/cont.py)
    show: int = field(default=0, metadata={
        "min": 0})  # print the first N outputs beside the reference text, marking where each first diverges
    remote_edge: str | None = field(default=None, metadata={
        "flag": "edge"})  # tcp://HOST:PORT of an edge serving elsewhere: only UEs run here (no link flag: real link)
    auth: str | None = None  # key dir from testbed.keys: CURVE between the UEs and the edge (None: none)
    heartbeat_ivl_ms: int = field(default=HEARTBEAT_IVL_MS, metadata={
        "min": 0})  # ZMTP heartbeat PING interval of the UEs' and the edge's sockets, ms
    heartbeat_timeout_ms: int = field(default=HEARTBEAT_TIMEOUT_MS, metadata={
        "min": 0})  # a connection silent this long after a PING is dropped, ms
    ue: UEConfig = field(default_factory=UEConfig, metadata={"skip": UE_SET_BY_RUN})  # the UEs' settings
    edge: ServeConfig = field(default_factory=ServeConfig, metadata={"skip": EDGE_SET_BY_RUN})  # the edge's settings
    link: LinkSpec = field(default_factory=LinkSpec, metadata={"skip": ("seed",)})  # emulated link (seed: the run's)

    def __post_init__(self) -> None:
        self.link = dataclasses.replace(self.link, seed=self.seed)
        if "all" in self.protocol.split(",") and self.protocol != "all":
            raise ValueError(f"--protocol {self.protocol}: 'all' already runs every protocol; give it alone")
        if self.ue.rejection_threshold is not None and not self.ue.rejection_predictor:
            raise ValueError("--rejection-threshold needs --rejection-predictor")
        if self.cpu_wakeup_us is not None and self.cpu_wakeup_us < 0:
            raise ValueError("--cpu-wakeup-us must be >= 0")
        if not 0 <= self.link.host_overhead_ms < math.inf:
            raise ValueError("--host-overhead-ms must be finite and >= 0")
        if self.dataset is not None:
            check_dataset(self.dataset, self.prompts_file)
        if self.remote_edge is not None:
            self._check_remote()
        if self.ue.csi == "configured" and self.real_link():
            raise ValueError("--csi configured needs an emulated link (give link flags); on the real link to --edge "
                             "use --csi measured")

    def _check_remote(self) -> None:
        """With --edge the edge's settings are the serving edge's: a local one given is an error naming it."""
        if not re.fullmatch(r"tcp://[^:/\s]+:\d+", self.remote_edge):
            raise ValueError(f"--edge must be tcp://HOST:PORT, got {self.remote_edge!r}")
        if self.netns:
            raise ValueError("--netns starts an edge in a namespace here; with --edge the edge already runs elsewhere")
        base = ServeConfig()
        given = [f.flag for f in config.flags(ServeConfig) if f.path[0] not in EDGE_SET_BY_RUN
                 and getattr(self.edge, f.path[0]) != getattr(base, f.path[0])]
        if given:
            raise ValueError(f"{', '.join(given)}: with --edge these are the serving edge's settings; set them on its "
                             "`python -m testbed.serve` command line (the run records what the edge reports)")

    def real_link(self) -> bool:
        """True when the UEs reach a remote edge over the real, unemulated link."""
        return self.remote_edge is not None and not self.link.emulated

    def csi_source(self) -> str:
        """What the head and auto condition on (--csi; by default configured, or measured on a real link)."""
        return self.ue.csi or ("measured" if self.real_link() else "configured")

    def protocols(self) -> list[str]:
        """The protocols this run runs: ``all`` is every one the edge's head can serve (ef needs a head that reads no
        drafter hidden states; a remote edge's head is not known here, so all of them)."""
        if self.protocol != "all":
            return self.protocol.split(",")
        hidden = self.remote_edge is None and head_reads_drafter(self.edge.head, self.edge.tau, self.edge.target)
        reads = ("h_draft",) if hidden else ()
        return [p for p in ALL_PROTOCOLS if PROTOCOLS[p].desc.serves(reads)]

    def flat(self) -> dict:
        """config.json's layout: the run's, the UEs' and the edge's settings side by side, and the link's."""
        nested = config.to_dict(self)
        return {k: v for k, v in nested.items() if k not in ("ue", "edge", "link")} | nested["ue"] | nested["edge"] \
            | {"link": asdict(self.link)}


def refuse_unserved(protocols: list[str], head_inputs: tuple[str, ...], head_desc: str) -> None:
    """A protocol the edge's head cannot decide is refused before any process starts, naming both: the head reads the
    drafter's hidden states and the protocol's DRAFT does not carry them (``ef``, a plugin's ``topk``)."""
    bad = unserved(protocols, head_inputs)
    if bad:
        uploads = ", ".join(servable(True))
        raise ValueError(f"--protocol {bad[0]} cannot be served by the head {head_desc}: the head reads the drafter's "
                         f"hidden states, which {bad[0]}'s DRAFT does not carry; give a head that reads only what the "
                         f"edge computes (--head with an edge-feature judge, or --head none) or a protocol that "
                         f"uploads them ({uploads})")


@functools.lru_cache(maxsize=8)
def head_reads_drafter(head: str, tau: float | None, target: str | None) -> bool:
    """Whether the local edge's head reads the drafter's hidden states (then it cannot serve ef)."""
    policy, _, _ = load_policy(head, tau, target)
    return "h_draft" in policy.inputs


def with_pair(cfg: RunConfig) -> RunConfig:
    """--pair: its drafter for the UEs and, for a local edge, its target; with --edge the serving edge has its own
    target (the UE's drafter must share its tokenizer, which the edge checks at OPEN)."""
    return apply_pair(cfg, drafter="ue.drafter", target=None if cfg.remote_edge else "edge.target")
