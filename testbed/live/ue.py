"""UE process: drafts with the drafter and runs a protocol against the edge, writing one record per round.

Usage: ``python -m testbed.ue --connect tcp://EDGE:5555 [--prompts N | --prompts-file F.jsonl] --out DIR``
Prompts: the first N of the built-in test split, or of a JSONL file whose rows hold ``prompt`` (text) or
``prompt_ids``, and optionally ``prompt_id`` and ``answer`` (the format testbed.run takes).  Writes ``config.toml``,
``rounds.csv``, ``outputs.jsonl`` (with each prompt's ``prompt_text`` and ``text`` where a tokenizer exists),
``summary.json`` and ``summary.csv`` to ``--out`` (and ``rounds.jsonl``, each round appended as it happens).  Prints
after each prompt a ``PROGRESS {json}`` line (for testbed.run) and a line with the start of its text, and the
summary table at the end.  A run in which every prompt failed exits 1.
"""
from __future__ import annotations

import dataclasses
import gc
import json
import math
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
import torch
import zmq
from transformers import PreTrainedModel

import config
from channel.emulator import parse_hostport
from channel.measure import CSIEstimator, retransmission_rate, sample_tcp
from channel.capture import capturing, iface_for
from channel.csi import CSI
from channel.trace import CSITrace
from protocols.auto import AUTO_RULES
from protocols.handshake import Vocab
from protocols.registry import PROTOCOLS
from protocols.ue_side import AUTO_DRAFT_LEN, EdgeError, HandshakeError, UEParams, UESession
from protocols.wire import Limits, MsgType, WireError, make
from testbed.common.link import LinkSpec
from testbed.common.summary import summarize, table, write_summary
from testbed.common.text import decoder, progress_line, text_fields
from testbed.live.client import Client, close_session, fetch_references, handshake, open_session
from testbed.live.liveness import HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS, Heartbeat
from testbed.live.resume import finish_round, send_draft
from testbed.live.retry import RetryExhausted
from wisv.tasks.evaluate import eos_id
from wisv.models.loader import DTYPE_CHOICES, builtin_paths, load_model, load_tokenizer, resolve_dtype, vocab_facts
from wisv.tasks.prompts import CHAT_TEMPLATE_MODES, prompt_rows
from wisv.records.rows import RoundLog, RoundRow, to_frame
from wisv.decoding.rejection import load_predictor, stop_rule, wasted_drafting
from wisv.decoding.sessions import DraftSession
from wisv.serving.wdt import confidence_summary
from wisv.timing.window import TreeWindowTracker, WindowTracker
from wisv.pairs import apply_pair

PROG = "python -m testbed.ue"  # as users type it: --help and error lines
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


def parse_k_by_rtt(text: str) -> dict[float, int]:
    """--draft-len-by-rtt ``RTT_MS:K[,...]`` -> {rtt_ms: K} (empty: off)."""
    out = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        rtt, sep, k = item.partition(":")
        try:
            out[float(rtt)] = int(k)
        except ValueError:
            raise ValueError(f"--draft-len-by-rtt: expected RTT_MS:K, got {item!r}") from None
        if not sep or out[float(rtt)] < 1:
            raise ValueError(f"--draft-len-by-rtt: expected RTT_MS:K with K >= 1, got {item!r}")
    return out


def oracle_k(table: dict[float, int], csi) -> int:
    """The K of the table entry nearest the RTT in force."""
    return table[min(table, key=lambda rtt: abs(rtt - csi.rtt_ms))]


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
    drafter: str | None = None  # local HF drafter directory; None = built-in toy drafter
    pair: str | None = None  # named pair: toy | smollm2 (python -m wisv.pairs build NAME); --drafter/--target win
    device: str = "cpu"  # torch device of the drafter
    dtype: str = field(default="auto", metadata={
        "choices": DTYPE_CHOICES})  # the drafter's weights (auto: fp32 on CPU, bf16/fp16 on CUDA)
    protocol: str = field(default="auto", metadata={"choices": tuple(PROTOCOLS)})  # protocol of every session
    auto_rule: str = field(default="cost", metadata={"choices": AUTO_RULES})  # auto's FH/SH rule
    draft_len: int = field(default=8, metadata={
        **DRAFT_LEN_TEXT, "example": 12})  # K, draft tokens per round (the largest, with pipeline_depth); auto: per round
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
    rejection_predictor: str | None = None  # WISP predictor (safetensors): end each block at the first predicted rejection
    rejection_threshold: float | None = field(default=None, metadata={
        "min": 0, "max": 1})  # flag a token when p(rejected) >= this (None: the predictor's own)
    proactive: int = field(default=0, metadata={
        "min": 0})  # SpecEdge: draft up to this many tokens past each block while it is verified (0: off)
    pipeline_depth: bool = False  # SpecEdge: choose K <= draft_len per round so that K * tau_d + RTT ~= verify time
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


@dataclass
class Local:
    """What every prompt of a UE run shares: the drafter, its vocabulary, the stop rule and the emulated link."""

    drafter: PreTrainedModel
    vocab: Vocab  # declared at OPEN
    link: LinkSpec | None = None  # the emulated link (None: a real one, whose measured CSI is recorded)
    stop: Callable | None = None  # WISP rejection predictor's stop rule
    window: WindowTracker | None = None  # --draft-len auto: what it learnt over the prompts so far
    edge: dict = field(default_factory=dict)  # the edge's settings from its last OPEN_OK
    endpoint: str = ""  # tcp://HOST:PORT the UE connects to
    log: RoundLog | None = None  # every round appended as it happens (rounds.jsonl)

    def tcp(self) -> tuple[int, int] | None:
        """(data segments sent, retransmitted) of this host's TCP connections to the endpoint (None: unknown)."""
        if not self.endpoint.startswith("tcp://"):
            return None
        try:
            host, port = parse_hostport(self.endpoint.removeprefix("tcp://"))
            return sample_tcp(socket.gethostbyname(host), port)
        except (ValueError, OSError):  # not HOST:PORT, or a name that does not resolve
            return None


def run_round(client: Client, sess: UESession, csi: CSI | None) -> dict:
    """One DRAFT/(HIDDEN_REQ/HIDDEN)/VERDICT exchange, its head and auto conditioned on ``csi``; returns the round's
    measurements (RoundRow fields)."""
    t_start = time.perf_counter()
    n_before = len(sess.tokens)
    msg = sess.next_draft(csi)
    io = send_draft(client, msg)
    t_pro = time.perf_counter()
    n_pro = sess.draft_proactively(client.reply_waiting)  # SpecEdge: overlaps the link and the verification
    t_pro = time.perf_counter() - t_pro
    finish_round(client, sess, msg, io)  # resends and resumes within the retry window
    r, v = sess.round, sess.round.verdict
    n = len(r.draft.tokens)
    wdt, t_wdt = wasted_drafting(n, v["n_accepted"], r.t_draft_s / max(1, n))  # WISP WDT
    t_edge = v.get("t_edge_s", v["t_verify_s"] + v["t_head_s"])
    return {"round": r.index, "protocol": r.protocol, "drafted": n, "accepted": v["n_accepted"],
            "mismatches": v["mismatches"], "queried": v["queried"], "exchanges": io.exchanges,
            "uplink_bytes": io.up, "downlink_bytes": io.down, "t_draft_s": r.t_draft_s,
            "t_comm_s": (io.t_last - io.t_first) - (t_edge + io.ue_mid_s), "t_verify_s": v["t_verify_s"],
            "t_head_s": v["t_head_s"], "t_round_s": time.perf_counter() - t_start, "wdt_tokens": wdt,
            "proactive_drafted": n_pro, "proactive_reused": r.reused, "t_proactive_s": t_pro, "t_wdt_s": t_wdt,
            "committed": len(sess.tokens) - n_before, "t_edge_s": t_edge, "retries": io.retries,
            "resumed": io.resumed, "window_k": r.window, **_tree_columns(r), **_confidence_columns(r)}


def _confidence_columns(r) -> dict:
    """The block's draft-confidence summary (RoundRow draft_* fields: the WDT predictor's training data)."""
    f = r.draft.features
    return confidence_summary(f[:, :3].numpy()) if r.tree is None and f is not None and len(f) else {}


def _tree_columns(r) -> dict:
    """The tree protocol's RoundRow fields (none for a chain round)."""
    if r.tree is None:
        return {}
    return {"tree_size": len(r.tree.tree), "tree_depth": r.tree.tree.depth, "accepted_depth": r.verdict["n_accepted"]}


def run_prompt(client: Client, loc: Local, cfg: UEConfig, pid: str, ids: list[int], index: int,
               est: CSIEstimator) -> tuple[dict, list[RoundRow]]:
    """Generate one prompt's output; returns the output record and its round records."""
    sid = f"{cfg.ue_id}-{index}"
    t_link0 = time.time() - cfg.link_t0_epoch_s  # on the emulated link's clock (its outages)
    tcp_before = loc.tcp() if loc.link is None else None  # a real link: its TCP counters (loss estimate)
    t0 = time.perf_counter()
    handshake(client, est, sid, cfg.probe_bytes > 0, index)
    t_probe = time.perf_counter() - t0
    oracle = parse_k_by_rtt(cfg.draft_len_by_rtt)
    k = max(oracle.values()) if oracle else cfg.draft_len
    params = UEParams(cfg.protocol, k, cfg.max_new_tokens, cfg.auto_rule, cfg.temperature,
                      cfg.seed + index, int(loc.drafter.config.vocab_size), cfg.proactive, cfg.pipeline_depth,
                      cfg.tree_budget, vocab=loc.vocab, draft_len_max=cfg.draft_len_max,
                      features=cfg.draft_features, follow_stop_depth=cfg.follow_stop_depth)
    sess = UESession(sid, DraftSession(loc.drafter, ids), params, eos_id(loc.drafter), loc.stop, loc.window)
    t1 = time.perf_counter()
    ok = open_session(client, sess)
    loc.edge = ok.header.get("edge", loc.edge)
    sess.d.hidden_layer = ok.header.get("hidden_layer", -1)  # the layer the edge's decision head was trained on
    rows, trace = [], loc.link.trace() if loc.link else None
    if oracle and trace is None:
        raise ValueError("--draft-len-by-rtt picks K from the emulated link's CSI in force: it needs an emulated link")
    while not sess.done:
        t_link = time.time() - cfg.link_t0_epoch_s
        in_force = trace.at(t_link) if trace else None
        prefix = len(ids) + len(sess.tokens)
        if oracle:
            sess.p.draft_len = oracle_k(oracle, in_force)
        measured = run_round(client, sess, in_force if csi_source(cfg, loc.link) == "configured" else est.csi())
        row = RoundRow(prompt_id=pid, ue_id=cfg.ue_id, prompt_len=len(ids), prefix_len=prefix, **measured,
                       **_csi_columns(in_force, est, measured=loc.link is None),
                       t_link_s=t_link, outage_s=_outage_s(trace, t_link, cfg.link_t0_epoch_s))
        rows.append(row)
        if loc.log:
            loc.log.append(row)
        est.add_round(row.t_comm_s, row.uplink_bytes, row.downlink_bytes, row.exchanges)
    t_e2e = time.perf_counter() - t1  # OPEN to the last VERDICT (eq. 22 plus session set-up)
    close_session(client, sess)
    if tcp_before is not None:  # the uplink's loss estimate over this prompt: TCP retransmissions per segment sent
        per = retransmission_rate(tcp_before, loc.tcp())
        rows = [dataclasses.replace(r, per=per) for r in rows]
    out = {"prompt_id": pid, "ue_id": cfg.ue_id, "tokens": sess.tokens, "rounds": sess.n_rounds,
           "t_e2e_s": t_e2e, "t_probe_s": t_probe, "outage_s": _outage_s(trace, t_link0, cfg.link_t0_epoch_s)}
    return out, rows


def _outage_s(trace: CSITrace | None, since_s: float, t0_epoch_s: float) -> float | None:
    """Seconds of the emulated link's outages from ``since_s`` (on its clock) until now; None without a link."""
    return trace.outages.overlap_s(since_s, time.time() - t0_epoch_s) if trace else None


def _csi_columns(csi, est: CSIEstimator, measured: bool = False) -> dict:
    """The CSI in force (RoundRow fields): the emulated link's (None without one), or with ``measured`` (a real
    link) the UE's own estimate (its loss: filled in per prompt by run_prompt); and the UE's estimate."""
    m = est.csi()
    cols = {"rtt_ms": None, "rate_up_mbps": None, "rate_down_mbps": None, "per": None, "per_down": None}
    if csi is None and measured:
        csi = m
    if csi is not None:
        cols = {"rtt_ms": csi.rtt_ms, "rate_up_mbps": csi.rate_up_mbps, "rate_down_mbps": csi.rate_down_mbps,
                "per": csi.per_up, "per_down": csi.per_down}
        if measured:
            cols |= {"rate_up_mbps": _finite(csi.rate_up_mbps), "rate_down_mbps": _finite(csi.rate_down_mbps),
                     "per": None, "per_down": None}
    return cols | {"est_rtt_ms": m.rtt_ms if m else None, "est_rate_up_mbps": m.rate_up_mbps if m else None,
                   "est_rate_down_mbps": m.rate_down_mbps if m else None}


def csi_source(cfg: UEConfig, link: LinkSpec | None) -> str:
    """What the head and auto condition on: --csi, or by default the emulated link's CSI (reproducible) and on a
    real link the UE's estimate; configured without an emulated link is a ValueError."""
    if cfg.csi == "configured" and link is None:
        raise ValueError("--csi configured needs an emulated link (--link-json); on a real link use --csi measured")
    return cfg.csi or ("configured" if link is not None else "measured")


def _finite(rate: float) -> float | None:
    """A rate, None for unlimited (inf)."""
    return rate if math.isfinite(rate) else None


def run(cfg: UEConfig) -> dict:
    """Run every prompt; write rounds.csv, outputs.jsonl, edge.json, summary.json and summary.csv; return the
    summary.  A handshake refusal raises HandshakeError, an edge silent for the whole retry window RetryExhausted;
    another edge error fails only its prompt."""
    torch.set_num_threads(1)
    cfg = apply_pair(cfg, target=None)
    link = LinkSpec(**json.loads(cfg.link_json)) if cfg.link_json else None
    csi_source(cfg, link)  # a bad --csi fails before any work
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    config.write_config(out, cfg, config.provenance())  # --config OUT/config.toml reruns it
    drafter_dir = Path(cfg.drafter) if cfg.drafter else builtin_paths()[0]
    tok = load_tokenizer(drafter_dir, "drafter")
    prompts = prompt_rows(tok, "test", cfg.prompts, cfg.prompts_file, chat_template=cfg.chat_template)
    drafter = load_model(drafter_dir, "drafter", cfg.device, resolve_dtype(cfg.dtype, cfg.device))
    gc.collect()
    gc.freeze()  # the loaded model's objects leave the GC's generations: no ~0.3 s full collection mid-run
    stop = stop_rule(load_predictor(cfg.rejection_predictor), cfg.rejection_threshold) if cfg.rejection_predictor else None
    loc = Local(drafter, Vocab(*vocab_facts(drafter, tok)), link, stop, endpoint=cfg.connect,
                log=RoundLog(out / "rounds.jsonl"),
                window=(TreeWindowTracker if cfg.protocol == "tree" else WindowTracker)(1, cfg.draft_len_max))
    ctx, est = zmq.Context(), CSIEstimator(probe_target_ms=cfg.probe_ms, first_probe_bytes=max(cfg.probe_bytes, 1))
    client = Client(ctx, cfg.connect, cfg.ue_id, Limits(vocab_size=int(drafter.config.vocab_size)),
                    cfg.recv_timeout_s, cfg.auth, Heartbeat(cfg.heartbeat_ivl_ms, cfg.heartbeat_timeout_ms), cfg.retry_s)
    all_rows, recs, refs, decode = [], [], None, decoder(tok)
    try:
        client.exchange(make(MsgType.PING, cfg.ue_id, None, seq=0, t_send=time.time()))  # connect; not a sample
        with (out / "outputs.jsonl").open("w") as f:
            for i, p in enumerate(prompts):
                rec, rows = _safe_prompt(client, loc, cfg, p, i, est)
                rec |= {} if rec.get("error") else text_fields(decode, p["prompt_ids"], rec["tokens"])
                all_rows += rows
                recs.append(rec)
                f.write(json.dumps(rec) + "\n")
                f.flush()
                print("PROGRESS " + json.dumps({"done": i + 1, "total": len(prompts), "prompt_id": rec["prompt_id"],
                                                "error": rec.get("error")}), flush=True)
                print(progress_line(i + 1, len(prompts), rec), flush=True)
        (out / "edge.json").write_text(json.dumps(loc.edge, indent=1))
        if cfg.reference:
            refs = fetch_references(client, prompts, cfg.max_new_tokens, f"{cfg.ue_id}-ref", loc.vocab)
    finally:
        to_frame(all_rows).to_csv(out / "rounds.csv", index=False)
        loc.log.close()
        client.close()
        ctx.term()
    return _summary(cfg, out, to_frame(all_rows), recs, prompts, tok, refs)


def _summary(cfg: UEConfig, out: Path, rounds: pd.DataFrame, recs: list[dict], prompts: list[dict], tok,
             refs: dict | None) -> dict:
    """The run's summary (testbed.run's columns) written to summary.json and summary.csv."""
    s = summarize(cfg.protocol, rounds, pd.DataFrame(recs), pd.DataFrame(prompts),
                  tok.decode if tok is not None else None, refs)
    write_summary(out, [s])
    return s


def _safe_prompt(client: Client, loc: Local, cfg: UEConfig, p: dict, i: int,
                 est: CSIEstimator) -> tuple[dict, list[RoundRow]]:
    """Run one prompt; an edge error or timeout is recorded for that prompt and the run goes on."""
    try:
        return run_prompt(client, loc, cfg, str(p["prompt_id"]), list(p["prompt_ids"]), i, est)
    except (EdgeError, TimeoutError, WireError) as e:
        if isinstance(e, TimeoutError):
            client.reconnect()
        return {"prompt_id": str(p["prompt_id"]), "ue_id": cfg.ue_id, "tokens": [], "error": str(e)}, []


def parse_args(argv: list[str] | None = None) -> UEConfig:
    return config.parse(UEConfig, argv, prog=PROG, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    print("CONFIG " + json.dumps(asdict(cfg)), flush=True)
    try:
        with capturing(cfg.capture, iface_for(cfg.capture, cfg.capture_iface, cfg.connect)):
            s = run(cfg)
    except (ValueError, EdgeError, HandshakeError, TimeoutError, WireError, RetryExhausted) as e:  # a refusal, no edge
        print(f"{PROG}: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
    print(table([s]), flush=True)
    print(f"results in {cfg.out}", flush=True)
    if s["errors"] and not s["prompts"]:
        first = next(r["error"] for r in map(json.loads, (Path(cfg.out) / "outputs.jsonl").open()) if r.get("error"))
        print(f"{PROG}: error: every prompt failed ({s['errors']}); the first: {first}", file=sys.stderr, flush=True)
        sys.exit(1)
