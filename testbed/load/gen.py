"""Emulated UE devices for load tests: one event loop drives N devices, each on its own ZeroMQ socket.

A device replays recorded greedy-SD blocks (``Trace``: the drafter's blocks along the target's greedy path,
which is what the edge commits when it verifies greedily), waits an emulated drafting time
``len(block) * tau_d`` before sending each, and runs its prompts one session after another.  Its OPEN
carries its SLO class (``meta.slo_tok_s``), its DRAFTs the emulated drafting time and, as the CSI's
``rtt_ms``, the network time it measured (a smoothed T_network of its rounds; the link's RTT until the first
verdict), which the edge takes off the deadline as WISP eq. 6 does.  Each VERDICT yields one
request record (a wisv.records.rows.RoundRow): the edge's queue and verify times, the link time, and whether the
request missed its verification budget ``tau_c = N_d / s_c - T_draft - T_network`` (WISP eq. 6, alpha = 1).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np
import zmq

from channel.measure import ewma
from protocols.schema import Verdict
from protocols.wire import Limits, Message, MsgType, decode, encode, make
from wisv.decoding.rejection import wasted_drafting
from wisv.records.rows import RoundRow
from wisv.serving.scheduler import deadline_s


@dataclass
class Trace:
    """One prompt's recorded greedy-SD run: the blocks drafted and what each round committed."""

    prompt_id: str
    prompt_ids: list[int]
    blocks: list[list[int]]  # drafted tokens per round
    accepted: list[int]  # accepted draft tokens per round (greedy verdicts)
    features: list[np.ndarray] | None = None  # per round [K, 3] fp16 draft features, sent when given (WDT predictor)


@dataclass
class Device:
    """One emulated UE."""

    name: str
    slo_tok_s: float
    traces: list[Trace]  # prompts, run in order
    sock: zmq.Socket | None = None
    prompt: int = 0  # index into traces
    round: int = 0  # index into the prompt's blocks
    state: str = "idle"  # idle -> opening -> drafting -> waiting -> ... -> done
    t_ready: float = 0.0  # idle: first OPEN due; drafting: drafting ends (perf_counter seconds)
    t_send: float = 0.0
    t_net_s: float = 0.0  # smoothed network time of its rounds, reported in each DRAFT
    records: list[dict] = field(default_factory=list)  # RoundRow fields, one per verified request
    errors: list[str] = field(default_factory=list)
    token: dict = field(default_factory=dict)  # {"token": the edge's token of the current session} after OPEN_OK

    @property
    def sid(self) -> str:
        return f"{self.name}-p{self.prompt}"

    @property
    def block(self) -> list[int]:
        return self.traces[self.prompt].blocks[self.round]


def request_record(dev: Device, v: Verdict, t_round_s: float, tau_d_s: float, t_sent_s: float = 0.0) -> dict:
    """One verified request as a RoundRow's fields: times, tokens and the SLO verdict (pure); ``t_sent_s``: when
    the DRAFT was sent, seconds since the load run started (for timelines: warm-up, the tail of the last sessions)."""
    n_d, accepted = len(dev.block), v.n_accepted
    t_draft = n_d * tau_d_s
    t_verify, t_head, t_edge = float(v.t_verify_s), float(v.t_head_s), float(v.t_edge_s)
    t_net = max(0.0, t_round_s - t_edge)
    budget = deadline_s(0.0, dev.slo_tok_s, n_d, t_draft, t_net)  # tau_c: the deadline counted from arrival
    wdt, t_wdt = wasted_drafting(n_d, accepted, tau_d_s)
    row = RoundRow(prompt_id=dev.traces[dev.prompt].prompt_id, ue_id=dev.name, round=dev.round, protocol="greedy",
                   drafted=n_d, accepted=accepted, committed=accepted + 1, wdt_tokens=wdt, t_wdt_s=t_wdt,
                   t_draft_s=t_draft, t_comm_s=t_net, t_verify_s=t_verify, t_head_s=t_head, t_round_s=t_round_s,
                   t_sent_s=t_sent_s, t_edge_s=t_edge, t_queue_s=max(0.0, t_edge - t_verify - t_head),
                   slo_tok_s=dev.slo_tok_s, budget_s=budget, violated=bool(t_edge > budget),
                   batch=v.batch)
    return asdict(row)


NET_SMOOTHING = 0.3  # weight of the newest round in a device's network-time estimate


def smooth(prev_s: float, new_s: float, weight: float = NET_SMOOTHING) -> float:
    """A device's network-time estimate after one more round (pure)."""
    return ewma(prev_s, new_s, weight)


class LoadLoop:
    """Drives the devices until every prompt is done or the deadline passes."""

    def __init__(self, ctx: zmq.Context, endpoint: str, devices: list[Device], draft_len: int, max_new: int,
                 tau_d_s: float, limits: Limits, t_net0_s: float = 0.0):
        self.devices, self.draft_len, self.max_new, self.tau_d_s, self.limits = (
            devices, draft_len, max_new, tau_d_s, limits)
        self.poller = zmq.Poller()
        self.t0 = 0.0  # perf_counter when run() started
        self.by_sock = {}
        for d in devices:
            d.sock = ctx.socket(zmq.DEALER)
            d.sock.setsockopt(zmq.IDENTITY, d.name.encode())
            d.sock.setsockopt(zmq.LINGER, 0)
            d.sock.connect(endpoint)
            self.poller.register(d.sock, zmq.POLLIN)
            self.by_sock[d.sock] = d
            d.t_net_s = t_net0_s  # until its first verdict: the link's RTT

    def run(self, timeout_s: float, progress=None, stagger_s: float = 0.0) -> None:
        """Run every device's prompts; device i opens its first session at i / N * stagger_s (arrivals spread
        evenly rather than every first prompt prefilled in one burst)."""
        self.start(stagger_s)
        t_end = self.t0 + timeout_s
        while any(d.state != "done" for d in self.devices) and time.perf_counter() < t_end:
            self.turn(progress)
        for d in self.devices:
            if d.state != "done":
                d.errors.append(f"unfinished after {timeout_s} s (state {d.state})")
            d.sock.close(0)

    def start(self, stagger_s: float = 0.0) -> None:
        """Start the clock; device i opens its first session at i / N * stagger_s."""
        t0 = self.t0 = time.perf_counter()
        for i, d in enumerate(self.devices):
            d.state, d.t_ready = "idle", t0 + stagger_s * i / len(self.devices)

    def turn(self, progress=None) -> None:
        """Open or send what is due, then handle the replies that arrive before the next thing is due."""
        now = time.perf_counter()
        for d in self.devices:
            if d.state == "idle" and d.t_ready <= now:
                self._open(d)
            elif d.state == "drafting" and d.t_ready <= now:
                self._send_draft(d)
        wait = min([d.t_ready - now for d in self.devices if d.state in ("idle", "drafting")] + [0.01])
        for sock, _ in self.poller.poll(max(0, int(wait * 1000))):
            self._on_reply(self.by_sock[sock], decode(sock.recv_multipart(), self.limits), progress)

    def _open(self, d: Device) -> None:
        if d.prompt >= len(d.traces):
            d.state = "done"
            return
        tr = d.traces[d.prompt]
        d.round, d.state = 0, "opening"
        self.on_send(d)
        d.sock.send_multipart(encode(make(MsgType.OPEN, d.sid, {"prompt": np.asarray(tr.prompt_ids, np.int32)},
                                          protocol="greedy", draft_len=self.draft_len, max_new_tokens=self.max_new,
                                          meta={"slo_tok_s": d.slo_tok_s})))

    def _start_drafting(self, d: Device) -> None:
        d.state, d.t_ready = "drafting", time.perf_counter() + len(d.block) * self.tau_d_s

    def on_send(self, d: Device) -> None:
        """Called as device ``d`` sends an OPEN or a DRAFT, before the send (nothing here; scripts/bench/soak.py notes
        the time)."""

    def _send_draft(self, d: Device) -> None:
        self.on_send(d)
        d.state, d.t_send = "waiting", time.perf_counter()
        tensors = {"tokens": np.asarray(d.block, np.int32)}
        feats = d.traces[d.prompt].features
        if feats is not None:
            tensors["features"] = feats[d.round]  # [K, 3]
        d.sock.send_multipart(encode(make(MsgType.DRAFT, d.sid, tensors,
                                          round=d.round, t_draft_s=len(d.block) * self.tau_d_s, protocol="greedy",
                                          csi={"rtt_ms": d.t_net_s * 1e3}, **d.token)))

    def _on_reply(self, d: Device, msg: Message, progress) -> None:
        if msg.type == MsgType.ERROR:
            d.errors.append(f"{d.sid}: [{msg.header['code']}] {msg.header['text']}")
            self._next_prompt(d, progress)
        elif msg.type == MsgType.OPEN_OK and d.state == "opening":
            d.token = {"token": msg.header["token"]}
            self._start_drafting(d)
        elif msg.type == MsgType.VERDICT and d.state == "waiting":
            self._on_verdict(d, Verdict.of(msg.header, msg.tensors), time.perf_counter() - d.t_send, progress)

    def _on_verdict(self, d: Device, v: Verdict, t_round: float, progress) -> None:
        tr = d.traces[d.prompt]
        d.records.append(request_record(d, v, t_round, self.tau_d_s, d.t_send - self.t0))
        d.t_net_s = smooth(d.t_net_s, d.records[-1]["t_comm_s"])
        if v.n_accepted != tr.accepted[d.round]:
            d.errors.append(f"{d.sid} round {d.round}: edge accepted {v.n_accepted}, the trace {tr.accepted[d.round]}")
            return self._next_prompt(d, progress)
        d.round += 1
        if v.done or d.round >= len(tr.blocks):
            return self._next_prompt(d, progress)
        self._start_drafting(d)

    def _next_prompt(self, d: Device, progress) -> None:
        d.sock.send_multipart(encode(make(MsgType.CLOSE, d.sid, **d.token)))
        d.prompt += 1
        if progress is not None:
            progress.update(1)
        self._open(d)
