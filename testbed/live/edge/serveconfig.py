"""The edge server's settings (``python -m testbed.serve`` flags): one dataclass, importable without the server."""
from __future__ import annotations

from dataclasses import dataclass, field

from protocols.edge_draft_names import EDGE_DRAFTS
from testbed.live.common.defaults import (
    HEARTBEAT_IVL_MS,
    HEARTBEAT_TIMEOUT_MS,
    MAX_QUEUE_MSGS,
    PEER_QUEUE_BYTES,
    TOTAL_QUEUE_BYTES,
)
from wisv import plugins
from wisv.models.choices import DTYPE_CHOICES
from wisv.serving.engines import ENGINE_CHOICES
from wisv.serving.scheduler import LOST_ORDER_CHOICES, SCHEDULER_CHOICES
from wisv.serving.vllm_config import VllmConfig


@dataclass
class ServeConfig:
    """Edge server settings."""

    bind: str = field(default="tcp://127.0.0.1:5555", metadata={
        "pattern": r"tcp://[^:/\s]+:\d+",
        "example": "tcp://0.0.0.0:5556"})  # endpoint to bind, tcp://HOST:PORT (0.0.0.0: all interfaces; port 0: any)
    target: str | None = None  # local HF directory of the target; None = built-in toy target
    pair: str | None = field(default=None, metadata={  # named pair: toy | smollm2 (python -m wisv.pairs build
        "also": plugins.names(plugins.PAIRS)})  # NAME) or a plugin's (checked on use); --drafter/--target win
    device: str = "cpu"  # torch device of the target
    engine: str = field(default="transformers", metadata={
        "choices": ENGINE_CHOICES})  # verification engine: transformers (ours) | vllm (docs/engines.md)
    dtype: str = field(default="auto", metadata={
        "choices": DTYPE_CHOICES})  # the target's weights (auto: fp32 on CPU, bf16/fp16 on CUDA)
    head: str = field(default="default", metadata={  # decision head for fh/sh/auto: default | none | accept-all
        "also": plugins.names(plugins.POLICIES)})  # | PATH (a trained head dir)
    tau: float | None = field(default=None, metadata={
        "min": 0, "max": 1})  # decision threshold, reject a mismatch iff p >= tau (None: the head's own tau)
    session_timeout_s: float = field(default=120.0, metadata={"above": 0})  # idle sessions are freed after this long, s
    max_sessions: int = field(default=256, metadata={"min": 1})  # OPEN beyond this many live sessions is refused
    sessions_per_identity: int = field(default=16, metadata={
        "min": 1})  # OPEN beyond this many live sessions of one socket identity is refused
    sessions_per_key: int = field(default=128, metadata={
        "min": 1})  # OPEN beyond this many live sessions of one client key (--auth) is refused
    sessions_per_source: int = field(default=128, metadata={
        "min": 1})  # OPEN beyond this many live sessions from one source address is refused
    reserved_sessions: int = field(default=8, metadata={
        "min": 0})  # the last slots of --max-sessions go only to peers (key, else address) holding none
    undrafted_timeout_s: float = field(default=15.0, metadata={
        "above": 0})  # a session that has sent no DRAFT this long after its OPEN is freed, s
    max_draft_len: int = field(default=64, metadata={"min": 1})  # largest accepted block K, tokens
    sibling: bool = False  # WISV: verify the target's token beside each mismatch too (sib_* features; transformers)
    batch_verify: bool = field(  # verify concurrent DRAFTs of many sessions in one target pass
        default=False)  # (wisv/serving/batchverify.py)
    scheduler: str = field(default="fcfs", metadata={"choices": SCHEDULER_CHOICES})  # batch selection (slo: WISP)
    max_batch: int = field(default=16, metadata={"min": 1})  # most requests in one verification pass
    kv_reuse: bool = True  # --no-kv-reuse: recompute each prefix every round (SLED baseline; uses the engine)
    memory_budget_mb: float = field(default=2048.0, metadata={
        "above": 0})  # cap on all sessions' KV caches together, checked before allocating, MB
    pass_rows: str | None = None  # a scripts/bench/pass_rows.py JSON: pad each session's verification pass by its
    #   target_pad_plan, where more rows cost less (wisv/decoding/passrows.py; a VerifySession per session only)
    estimator: str | None = None  # verification-time profile JSON from testbed.profile (needed by --scheduler slo)
    guard_ms: float = field(default=0.0, metadata={
        "min": 0})  # slo: guard time delta (LST = deadline - v - delta) absorbing estimator error, ms
    lost_order: str = field(default="last",
                            metadata={"choices": LOST_ORDER_CHOICES})  # slo: lost requests go last or by EDF (paper)
    slack_ms: float | None = field(default=None, metadata={
        "min": 0})  # slo: time a batch keeps before its earliest feasible deadline, ms (None: guard_ms)
    wdt_predictor: str | None = None  # slo: g_i from this WDT predictor (scripts/train/wdt_predictor.py; None: mean)
    arrival_reserve: bool = True  # slo: no batch so long that a tight request arriving meanwhile must miss (off: paper)
    max_session_tokens: int = field(default=4096, metadata={
        "min": 1})  # largest generation budget (max_new_tokens) a session or REFERENCE may ask, tokens
    reference_cache: int = field(default=4096, metadata={
        "min": 0})  # target-only outputs kept for REFERENCE requests (least recently used dropped), prompts
    max_context_tokens: int | None = field(default=None, metadata={
        "min": 1})  # largest prompt + max_new_tokens asked (None: the target's context), tokens
    socket_hwm_msgs: int = field(default=16, metadata={
        "min": 0})  # ZeroMQ send/receive high-water mark of the ROUTER, per peer, messages
    inbox_max_msgs: int = field(default=MAX_QUEUE_MSGS, metadata={
        "min": 1})  # batching: arrivals queued for the serving loop; beyond, ERROR busy, messages
    inbox_peer_mb: float = field(default=PEER_QUEUE_BYTES / 2**20, metadata={
        "above": 0})  # batching: bytes one peer's queued arrivals may hold, MB
    inbox_total_mb: float = field(default=TOTAL_QUEUE_BYTES / 2**20, metadata={
        "above": 0})  # batching: bytes all queued arrivals may hold, MB
    max_probe_bytes: int = field(default=2**20, metadata={
        "min": 0})  # largest PING payload and PONG reply_bytes (a UE's adaptive probes reach 1 MiB), bytes
    probe_rate_kb_s: float = field(default=1024.0, metadata={
        "min": 0})  # PONG payload bytes one peer may ask for per second, beyond a burst, KB/s
    probe_burst_kb: float = field(default=4096.0, metadata={
        "min": 0})  # PONG payload bytes one peer may ask for at once, KB
    handshake_ivl_ms: int = field(default=5000, metadata={
        "min": 0})  # a connection that has not finished its ZMTP/CURVE handshake by then is closed, ms
    heartbeat_ivl_ms: int = field(default=HEARTBEAT_IVL_MS, metadata={
        "min": 0})  # unused: the ROUTER sends no PINGs (libzmq abort; UEs' keepalives are used), ms
    heartbeat_timeout_ms: int = field(default=HEARTBEAT_TIMEOUT_MS, metadata={
        "min": 0})  # a session whose UE sent no keepalive (or message) this long is freed, ms
    auth: str | None = None  # key dir from testbed.keys: require CURVE, accept only DIR/clients/*.key (None: anyone)
    capture: str | None = None  # record a pcap of the edge's traffic here (root; tcpdump, else scapy)
    capture_iface: str | None = None  # interface to capture on (None: the one of --bind's address; 0.0.0.0: give it)
    insecure: bool = False  # serve beyond loopback without --auth (protected mode refuses it otherwise)
    edge_draft: str = field(default="none", metadata={"choices": EDGE_DRAFTS})  # the edge drafts for its server-only
    #   streams and auto's handed-over rounds, and extends greedy chains' drafts, verified in the same pass: none |
    #   ngram (prompt lookup) | suffix (an index of the sessions' prompts and outputs; docs/suffix-drafting.md)
    edge_draft_tokens: int = field(default=8, metadata={"min": 1})  # most tokens one edge draft carries, tokens
    edge_draft_cache_mb: float = field(default=64.0, metadata={
        "above": 0})  # --edge-draft suffix: bound of the shared index over all sessions, MB
    journal: str | None = None  # append opens, per-round commits and drops to this JSONL file (edge/journal.py)
    vllm: VllmConfig = field(default_factory=VllmConfig)  # --engine vllm: the engine options passed to vLLM
