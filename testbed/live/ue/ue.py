"""UE process: drafts with the drafter and runs a protocol against the edge, writing one record per round.

Usage: ``python -m testbed.ue --connect tcp://EDGE:5555 [--prompts N | --prompts-file F.jsonl] --out DIR``
Prompts: the first N of the built-in test split, or of a JSONL file whose rows hold ``prompt`` (text) or
``prompt_ids``, and optionally ``prompt_id`` and ``answer`` (the format testbed.run takes).  Writes ``config.toml``,
``rounds.csv``, ``outputs.jsonl`` (with each prompt's ``prompt_text`` and ``text`` where a tokenizer exists),
``summary.json`` and ``summary.csv`` to ``--out`` (and ``rounds.jsonl``, each round appended as it happens).  Prints
after each prompt a ``PROGRESS {json}`` line (for testbed.run) and a line with the start of its text, and the
summary table at the end.  A run in which every prompt failed exits 1.  ``--interleave P1 P2 ...`` runs each prompt
under every one of those protocols in turn, each into ``--out`` with ``{protocol}`` filled in (testbed.live.ue.lanes).
"""
from __future__ import annotations

import dataclasses
import gc
import json
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import torch
import zmq

import config
from channel.capture import capturing, iface_for
from channel.csitrace import CSITrace
from channel.measure import CSIEstimator, retransmission_rate
from protocols.ue_side import EdgeError, HandshakeError, UEParams
from protocols.ue_stream import ue_session
from protocols.wire import Limits, MsgType, WireError, make
from testbed.common.files import write_csv_atomic, write_text_atomic
from testbed.common.link import LinkSpec
from testbed.common.summary import summarize, table, write_summary
from testbed.common.text import Decode, decoder, progress_line, text_fields
from testbed.live.common.liveness import Heartbeat
from testbed.live.ue.client import Client, close_session, fetch_references, handshake, open_session
from testbed.live.ue.drafting import check, load_drafter
from testbed.live.ue.kept import in_prompt_order
from testbed.live.ue.lanes import Lane, Local, lane_configs, open_lane, record, session_id
from testbed.live.ue.retry import RetryExhausted
from testbed.live.ue.ueconfig import UEConfig
from testbed.live.ue.ueround import run_round
from wisv.decoding.rejection import load_predictor, stop_rule
from wisv.pairs import apply_pair
from wisv.records.rows import RoundRow, to_frame
from wisv.records.summary import spec_decode_metrics
from wisv.tasks.prompts import prompt_rows
from wisv.timing.protodesc import describe

PROG = "python -m testbed.ue"  # as users type it: --help and error lines


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


def run_prompt(client: Client, loc: Local, cfg: UEConfig, pid: str, ids: list[int], index: int,
               est: CSIEstimator, sid: str) -> tuple[dict, list[RoundRow]]:
    """Generate one prompt's output in the edge session ``sid``; returns the output record and its round records."""
    t_link0 = time.time() - cfg.link_t0_epoch_s  # on the emulated link's clock (its outages)
    tcp_before = loc.tcp() if loc.link is None else None  # a real link: its TCP counters (loss estimate)
    edge = describe(cfg.protocol).edge_rounds  # False: on-device, no session with the edge
    t0 = time.perf_counter()
    if edge:
        handshake(client, est, sid, cfg.probe_bytes > 0, index)
    t_probe = time.perf_counter() - t0
    oracle = parse_k_by_rtt(cfg.draft_len_by_rtt)
    k = max(oracle.values()) if oracle else cfg.draft_len
    params = UEParams(protocol=cfg.protocol, draft_len=k, max_new_tokens=cfg.max_new_tokens, auto_rule=cfg.auto_rule,
                      temperature=cfg.temperature, seed=cfg.seed + index,
                      vocab_size=loc.drafter.vocab_size, proactive=cfg.proactive,
                      pipeline_depth=cfg.pipeline_depth, tree_budget=cfg.tree_budget, vocab=loc.drafter.vocab,
                      draft_len_max=cfg.draft_len_max, features=cfg.draft_features,
                      follow_stop_depth=cfg.follow_stop_depth, stream_every_tokens=cfg.stream_every_tokens,
                      stream_every_ms=cfg.stream_every_ms, reply_timeout_s=cfg.recv_timeout_s,
                      run_part_tokens=cfg.run_part_tokens,
                      lookup_stop_streak=cfg.lookup_stop_streak)
    d = loc.drafter.session(ids)
    params.target_features = d.reads_features
    sess = ue_session(sid, d, params, loc.drafter.eos, loc.stop, loc.window)  # by the protocol's description
    loc.window = sess.window  # the first prompt's, by the protocol's round class (a tree's: TreeRounds.tracker)
    t1 = time.perf_counter()
    if edge:
        ok = open_session(client, sess)
        loc.edge = ok.edge if ok.edge is not None else loc.edge
        sess.d.hidden_layer = ok.hidden_layer  # the layer the edge's decision head was trained on
    rows, trace = [], loc.link.trace() if loc.link else None
    if oracle and trace is None:
        raise ValueError("--draft-len-by-rtt picks K from the emulated link's CSI in force: it needs an emulated link")
    while not sess.done:
        t_link = time.time() - cfg.link_t0_epoch_s
        in_force = trace.at(t_link) if trace else None
        prefix = len(ids) + len(sess.tokens)
        if oracle:
            sess.p.draft_len = oracle_k(oracle, in_force)
        measured = run_round(client, sess, in_force if csi_source(cfg, loc.link) == "configured" else est.csi(), t1)
        row = RoundRow(prompt_id=pid, ue_id=cfg.ue_id, prompt_len=len(ids), prefix_len=prefix, **measured,
                       **_csi_columns(in_force, est, measured=loc.link is None),
                       t_link_s=t_link, outage_s=_outage_s(trace, t_link, cfg.link_t0_epoch_s))
        rows.append(row)
        if loc.log:
            loc.log.append(row)
        est.add_round(row.t_comm_s, row.uplink_bytes, row.downlink_bytes, row.exchanges)
    t_e2e = time.perf_counter() - t1  # OPEN to the last VERDICT (eq. 22 plus session set-up)
    if edge:
        close_session(client, sess)
    sess.follow_last()  # the agreement over the last chunk, for the next prompt's choice (the edge closed first)
    if tcp_before is not None:  # the uplink's loss estimate over this prompt: TCP retransmissions per segment sent
        per = retransmission_rate(tcp_before, loc.tcp())
        rows = [dataclasses.replace(r, per=per) for r in rows]
    out = {"prompt_id": pid, "ue_id": cfg.ue_id, "tokens": sess.tokens, "rounds": sess.n_rounds,
           "t_e2e_s": t_e2e, "t_probe_s": t_probe, "outage_s": _outage_s(trace, t_link0, cfg.link_t0_epoch_s),
           **spec_decode_metrics(to_frame(rows))}  # vLLM's per-request names, from the prompt's rounds
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


def run(cfg: UEConfig) -> list[dict]:
    """Run every prompt, under each lane's protocol in turn (testbed.live.ue.lanes); write each lane's rounds.csv,
    outputs.jsonl, edge.json, summary.json and summary.csv; return their summaries.  A handshake refusal raises
    HandshakeError, an edge silent for the whole retry window RetryExhausted; another edge error fails only its
    prompt."""
    torch.set_num_threads(1)
    cfg = apply_pair(cfg, target=None)
    link = LinkSpec(**json.loads(cfg.link_json)) if cfg.link_json else None
    lane_cfgs = lane_configs(cfg)
    for c in lane_cfgs:
        csi_source(c, link)  # a bad --csi fails before any work
        check(c)  # and a bad --drafter-head or --drafter ngram's protocol, before the drafter loads
    drafter = load_drafter(cfg)
    tok = drafter.tok
    prompts = prompt_rows(tok, "test", cfg.prompts, cfg.prompts_file, chat_template=cfg.chat_template)
    gc.collect()
    gc.freeze()  # the loaded model's objects leave the GC's generations: no ~0.3 s full collection mid-run
    stop = (stop_rule(load_predictor(cfg.rejection_predictor), cfg.rejection_threshold) if cfg.rejection_predictor
            else None)
    ids = [str(p["prompt_id"]) for p in prompts]
    lanes = [open_lane(c, ids, lambda log: Local(drafter, link, stop, endpoint=cfg.connect, log=log))
             for c in lane_cfgs]
    ctx, est = zmq.Context(), CSIEstimator(probe_target_ms=cfg.probe_ms, first_probe_bytes=max(cfg.probe_bytes, 1))
    client = Client(ctx, cfg.connect, cfg.ue_id, Limits(vocab_size=drafter.vocab_size),
                    cfg.recv_timeout_s, cfg.auth, Heartbeat(cfg.heartbeat_ivl_ms, cfg.heartbeat_timeout_ms),
                    cfg.retry_s)
    refs, decode = None, decoder(tok)
    try:
        client.exchange(make(MsgType.PING, cfg.ue_id, None, seq=0, t_send=time.time()))  # connect; not a sample
        for i, p in enumerate(prompts):
            for lane in lanes:
                _lane_prompt(client, lane, p, i, len(prompts), est, decode, interleaved=len(lanes) > 1)
        for lane in lanes:
            if cfg.keep_done:  # the kept prompts first, then the rest: in prompt order again, atomically
                lane.recs = in_prompt_order(lane.recs, ids)
                write_text_atomic(lane.out / "outputs.jsonl", "".join(json.dumps(r) + "\n" for r in lane.recs))
            write_text_atomic(lane.out / "edge.json", json.dumps(lane.local.edge, indent=1))
        if cfg.reference:
            refs = fetch_references(client, prompts, cfg.max_new_tokens, f"{cfg.ue_id}-ref", drafter.vocab)
    finally:
        for lane in lanes:
            lane.outputs.close()
            write_csv_atomic(lane.out / "rounds.csv", to_frame(lane.rows))
            lane.local.log.close()
        client.close()
        ctx.term()
    return [_summary(lane.cfg, lane.out, to_frame(lane.rows), lane.recs, prompts, tok, refs) for lane in lanes]


def _lane_prompt(client: Client, lane: Lane, p: dict, i: int, n: int, est: CSIEstimator, decode: Decode | None,
                 interleaved: bool) -> None:
    """Prompt ``i`` of ``n`` under one lane's protocol (skipped when an interrupted run completed it), with its
    PROGRESS line (testbed.run counts them) and a line with the start of its text."""
    pid = str(p["prompt_id"])
    progress = {"done": i + 1, "total": n, "prompt_id": pid} | ({"protocol": lane.cfg.protocol} if interleaved else {})
    if pid in lane.kept.ids:  # done before the interruption: same index, same seed for the rest
        print("PROGRESS " + json.dumps(progress), flush=True)
        return
    rec, rows = _safe_prompt(client, lane.local, lane.cfg, p, i, est, session_id(lane.cfg, i, interleaved))
    rec |= {} if rec.get("error") else text_fields(decode, p["prompt_ids"], rec["tokens"])
    record(lane, rec, rows)
    print("PROGRESS " + json.dumps(progress | {"prompt_id": rec["prompt_id"], "error": rec.get("error")}), flush=True)
    print(progress_line(i + 1, n, rec), flush=True)


def _summary(cfg: UEConfig, out: Path, rounds: pd.DataFrame, recs: list[dict], prompts: list[dict], tok,
             refs: dict | None) -> dict:
    """The run's summary (testbed.run's columns) written to summary.json and summary.csv."""
    s = summarize(cfg.protocol, rounds, pd.DataFrame(recs), pd.DataFrame(prompts),
                  tok.decode if tok is not None else None, refs)
    write_summary(out, [s])
    return s


def _safe_prompt(client: Client, loc: Local, cfg: UEConfig, p: dict, i: int, est: CSIEstimator,
                 sid: str) -> tuple[dict, list[RoundRow]]:
    """Run one prompt; an edge error or timeout is recorded for that prompt and the run goes on."""
    try:
        return run_prompt(client, loc, cfg, str(p["prompt_id"]), list(p["prompt_ids"]), i, est, sid)
    except (EdgeError, TimeoutError, WireError) as e:
        if client.keepalive is not None:
            client.keepalive.release(sid)  # the failed prompt's session: no longer kept alive
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
            summaries = run(cfg)
    except (ValueError, FileNotFoundError, EdgeError, HandshakeError, TimeoutError, WireError,
            RetryExhausted) as e:  # a bad input path, a refusal, no edge
        print(f"{PROG}: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
    print(table(summaries), flush=True)
    print(f"results in {cfg.out}", flush=True)
    for c, s in zip(lane_configs(cfg), summaries):
        if s["errors"] and not s["prompts"]:
            first = next(r["error"] for r in map(json.loads, (Path(c.out) / "outputs.jsonl").open()) if r.get("error"))
            of = f" of {c.protocol}" if cfg.interleave else ""
            print(f"{PROG}: error: every prompt{of} failed ({s['errors']}); the first: {first}",
                  file=sys.stderr, flush=True)
            sys.exit(1)
