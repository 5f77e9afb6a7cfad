"""The UE process's settings (``python -m testbed.ue`` flags): one dataclass and its flag parsers, importable without
the UE (no torch, no zmq)."""
from __future__ import annotations

from dataclasses import dataclass, field

import config
from protocols.auto import AUTO_RULES
from protocols.registry import PROTOCOLS
from testbed.live.common.defaults import HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS
from wisv import plugins
from wisv.models.choices import DTYPE_CHOICES
from wisv.tasks.prompts import CHAT_TEMPLATE_MODES
from wisv.timing.window import AUTO_DRAFT_LEN

CSI_SOURCES = ("measured", "configured")  # --csi: the UE's estimate, or the emulated link's CSI in force


def parse_draft_len(tokens: list[str] | str | int, flag: str = "--draft-len") -> int:
    """--draft-len (or --tree-budget): a positive number of tokens, or ``auto`` (AUTO_DRAFT_LEN)."""
    text = " ".join(map(str, tokens)) if isinstance(tokens, list) else tokens
    if str(text).strip().lower() == "auto":
        return AUTO_DRAFT_LEN
    try:
        k = int(text)
    except ValueError:
        raise config.ConfigError(f"{flag}: expected a number of tokens or auto, got {text!r}") from None
    if k < 1:
        raise config.ConfigError(f"{flag}: must be >= 1 (or auto), got {k}")
    return k


def format_draft_len(k: int) -> str:
    return "auto" if k == AUTO_DRAFT_LEN else str(k)


DRAFT_LEN_TEXT = {"parse": parse_draft_len, "format": lambda k: [format_draft_len(k)]}  # --draft-len 8 | auto
TREE_BUDGET_TEXT = {"parse": lambda t: parse_draft_len(t, "--tree-budget"),
                    "format": lambda k: [format_draft_len(k)]}  # --tree-budget 16 | auto


@dataclass
class UEConfig:
    """UE process settings."""

    connect: str = "tcp://127.0.0.1:5601"  # edge (or link emulator) endpoint, tcp://HOST:PORT
    prompts: int = field(default=20, metadata={
        "min": 1})  # first N problems of the built-in test split (or of --prompts-file)
    prompts_file: str | None = None  # JSONL with prompt (text) or prompt_ids, optional prompt_id and answer
    chat_template: str = field(default="auto", metadata={
        "choices": CHAT_TEMPLATE_MODES})  # prompt text through the tokenizer's chat template (auto: if it has one)
    out: str = "ue-out"  # output directory (rounds.csv, outputs.jsonl, summary.json, summary.csv)
    ue_id: str = "ue0"  # identity prefix of this UE's sessions
    drafter: str | None = None  # local HF drafter directory, or ngram: prompt lookup, no model; None = built-in toy
    prompt_lookup_min: int = field(default=2, metadata={"min": 1})  # --drafter ngram: shortest n-gram matched, tokens
    prompt_lookup_max: int = field(default=4, metadata={"min": 1})  # --drafter ngram: longest n-gram matched, tokens
    num_speculative_tokens: int | None = field(default=None, metadata={  # --drafter ngram: most tokens a lookup
        "min": 1})  # proposes (None: the round's K, --draft-len; with auto the K it chooses, <= --draft-len-max)
    lookup_stop_streak: int = field(default=0, metadata={  # --drafter ngram with auto: the edge ends a run handed
        "min": 0})  # to it after this many tokens in a row the lookup named first, and the UE speculates (0: never)
    vocab_dir: str | None = None  # --drafter ngram: the model directory whose tokenizer, vocab size and EOS the UE
    #   declares, no weights loaded (None: the pair's target, else the built-in target)
    pair: str | None = field(default=None, metadata={  # named pair: toy | smollm2 (python -m wisv.pairs build
        "also": plugins.names(plugins.PAIRS)})  # NAME) or a plugin's (checked on use); --drafter/--target win
    device: str = "cpu"  # torch device of the drafter
    dtype: str = field(default="auto", metadata={
        "choices": DTYPE_CHOICES})  # the drafter's weights (auto: fp32 on CPU, bf16/fp16 on CUDA)
    protocol: str = field(default="auto", metadata={"choices": tuple(PROTOCOLS)})  # protocol of every session
    interleave: list[str] = field(default_factory=list, metadata={  # run each prompt under each of these protocols
        "choices": tuple(PROTOCOLS), "example": ["server", "greedy"]})  # in turn, into --out's {protocol} (--protocol
    #   unused); empty: --protocol alone
    auto_rule: str = field(default="cost", metadata={"choices": AUTO_RULES})  # auto's FH/SH rule
    draft_len: int = field(default=8, metadata={  # K, draft tokens per round (the largest, with pipeline_depth);
        **DRAFT_LEN_TEXT, "example": 12})  # auto: per round
    draft_len_max: int = field(default=32, metadata={"min": 1})  # --draft-len auto: the largest K it may choose, tokens
    follow_stop_depth: bool = False  # without --rejection-predictor: draft at most the edge's suggested stop depth
    draft_features: bool = False  # each DRAFT carries the drafter's max prob, entropy and top-2 margin per token (fp16)
    draft_len_by_rtt: str = field(default="", metadata={
        "example": "5:8,60:16"})  # benchmark oracle: K by the emulated link's RTT in force, RTT_MS:K[,...] ("": off)
    max_new_tokens: int = field(default=160, metadata={"min": 1})  # generation budget per prompt, tokens
    temperature: float = field(default=1.0, metadata={"above": 0})  # sampling temperature (reject)
    seed: int = 0  # sampling seed base (prompt i samples with seed + i)
    probe_bytes: int = field(default=32768, metadata={
        "min": 0, "max": 1048576})  # first rate probe per direction, bytes; later ones last --probe-ms (0: no probes)
    probe_ms: float = field(default=100.0, metadata={
        "above": 0})  # rate probes are sized to serialize for this long at the estimate, ms (RTT jitter << it)
    csi: str | None = field(default=None, metadata={
        "choices": CSI_SOURCES, "example": "measured"})  # CSI the head and auto use (none: configured if emulated)
    link_json: str | None = None  # JSON of the emulated LinkSpec: the CSI in force (recorded; --csi configured)
    link_t0_epoch_s: float = 0.0  # wall-clock time the link's trace started, s since the epoch
    recv_timeout_s: float = field(default=10.0, metadata={
        "above": 0})  # per attempt: no reply within this long, reconnect and send again, s
    retry_s: float = field(default=60.0, metadata={
        "min": 0})  # retry window: resend (with backoff) and resume for this long, then the run fails, s
    drafter_head: str | None = field(  # an EAGLE-style feature head (scripts/train/feature_drafter.py):
        default=None)  # ask the edge for the target's features and draft with it
    feature_rows: int = field(default=1, metadata={  # with --drafter-head: the target's feature rows each VERDICT
        "min": 1})  # brings, the newest committed positions' (1: the last one; K + 1: every committed one), rows
    rejection_predictor: str | None = field(  # WISP predictor (safetensors):
        default=None)  # end each block at the first predicted rejection
    rejection_threshold: float | None = field(default=None, metadata={
        "min": 0, "max": 1})  # flag a token when p(rejected) >= this (None: the predictor's own)
    proactive: int = field(default=0, metadata={
        "min": 0})  # SpecEdge: draft up to this many tokens past each block while it is verified (0: off)
    pipeline_depth: bool = False  # SpecEdge: choose K <= draft_len per round so that K * tau_d + RTT ~= verify time
    stream_every_tokens: int | None = field(default=None, metadata={  # server-only and on-device: a chunk of
        "min": 1})  # the stream ends at this many tokens (neither this nor --stream-every-ms: every token a chunk)
    stream_every_ms: float | None = field(default=None, metadata={  # server-only and on-device: a chunk ends this
        "above": 0, "below": 3.6e6})  # long after the previous one, ms (with --stream-every-tokens: whichever first)
    run_part_tokens: int | None = field(default=None, metadata={  # auto: a run handed to the edge comes in parts of
        "min": 1})  # at most this many tokens (1: every token, as server-only streams; None: as large as arrives
    #   well within the reply timeout, fewer CHUNKs but the run's first token comes with its first part)
    tree_budget: int = field(default=16, metadata={
        **TREE_BUDGET_TEXT, "example": 8})  # tree protocol: draft tokens per tree, N (--proactive adds a chain); auto
    reference: bool = True  # ask the edge for target-only greedy outputs, for matches_target (--no-reference: skip)
    heartbeat_ivl_ms: int = field(default=HEARTBEAT_IVL_MS, metadata={
        "min": 0})  # ZMTP heartbeat PING interval of the UE's socket, ms (0: none)
    heartbeat_timeout_ms: int = field(default=HEARTBEAT_TIMEOUT_MS, metadata={
        "min": 0})  # a connection silent this long after a PING is redialled, ms
    auth: str | None = None  # key dir from testbed.keys: CURVE with DIR/client.key_secret, DIR/edge.key (None: none)
    capture: str | None = None  # record a pcap of the run here (root; tcpdump, else scapy): channel.trace from-pcap
    capture_iface: str | None = None  # interface to capture on (None: the one the route to --connect uses)
    keep_done: bool = False  # keep the prompts complete in --out's files and run only the rest (testbed.run --continue)
