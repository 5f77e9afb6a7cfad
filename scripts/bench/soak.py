"""Soak benchmark: N UEs against a batching edge for minutes; the edge's RSS over time, stuck sessions and errors.

Usage: ``python -m scripts.bench.soak [--ues 32] [--duration-s 300] [--out runs/soak/soak.json]``.
The edge (``testbed.serve --batch-verify --head none``, built-in toy pair) is a real process on loopback.  The UEs
are emulated in this process (testbed/load/gen.py, as ``testbed.load`` does): each replays the toy pair's recorded
greedy-SD blocks of its prompts over its own socket, cycling through them until the time is up, and every VERDICT
is checked against the recording (the edge must commit what the target's greedy path does).  32 ``testbed.ue``
processes would hold 32 copies of torch and the drafter (~350 MB each); the edge's side is the same.
The edge's RSS is sampled every ``--sample-s``; a session is stuck when its UE has waited more than ``--stuck-s`` for
a reply.  It passes when the RSS after warm-up grows by at most ``--max-rss-growth`` (the median of the last quarter
of the samples after warm-up over that of the first quarter), no session got stuck and nothing failed.  Writes the
JSON to ``--out`` with its config beside it (``soak_config.toml``); exits 1 when it does not pass.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
import zmq

import config
from protocols.wire import Limits, MsgType, encode, make
from testbed.common.machine import machine_info
from testbed.live.edge.serveconfig import ServeConfig
from testbed.live.orchestrate.procs import Child
from testbed.load.cli import LoadConfig, make_traces
from testbed.load.gen import Device, LoadLoop, Trace

ROOT = Path(__file__).resolve().parents[2]

MB = 2**20
SLO_TOK_S = 1000.0  # the SLO class every UE declares (nominal: the fcfs edge does not schedule by it)


@dataclass
class SoakConfig:
    """One soak run (written beside the JSON)."""

    ues: int = 32  # emulated UEs, each on its own socket
    duration_s: float = 300.0  # how long the UEs keep going, s
    warmup_s: float = 60.0  # RSS growth is measured from the first sample after this, s
    sample_s: float = 5.0  # edge RSS sampling period, s
    stuck_s: float = 10.0  # a UE waiting longer than this for a reply is a stuck session, s
    max_rss_growth: float = 0.05  # pass: RSS at the end <= (1 + this) x RSS after warm-up (quarter medians)
    prompts: int = 8  # distinct prompts recorded; every UE cycles through them (starting at its own)
    draft_len: int = 8  # K, draft tokens per round
    max_new_tokens: int = 64  # generation budget per prompt, tokens
    tau_d_ms: float = 5.0  # emulated drafting time per token on a UE, ms
    stagger_s: float = 2.0  # UEs open their first sessions evenly spread over this long, s
    max_batch: int = 16  # the edge's most requests per verification pass
    out: str = "runs/soak/soak.json"  # result JSON, its config beside it: soak_config.toml (committed: results/soak/)


class Cycle(Sequence):
    """A UE's prompts without end: the recorded traces from ``start`` on, round and round."""

    def __init__(self, traces: list[Trace], start: int):
        self.traces, self.start = traces, start

    def __len__(self) -> int:
        return sys.maxsize

    def __getitem__(self, i: int) -> Trace:
        return self.traces[(self.start + i) % len(self.traces)]


class SoakLoop(LoadLoop):
    """The load loop, noting when each UE last sent (what it waits on) and counting finished prompts."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sent_at: dict[str, float] = {}
        self.prompts_done = 0

    def on_send(self, d: Device) -> None:
        self.sent_at[d.name] = time.perf_counter()

    def update(self, n: int) -> None:
        """Progress callback of ``turn``: n more prompts finished."""
        self.prompts_done += n

    def waiting(self) -> dict[str, float]:
        """UE -> when it sent what it still waits a reply for."""
        return {d.sid: self.sent_at[d.name] for d in self.devices if d.state in ("opening", "waiting")}

    def close_all(self) -> None:
        """CLOSE every UE's current session and its socket."""
        for d in self.devices:
            if d.state != "idle":
                d.sock.send_multipart(encode(make(MsgType.CLOSE, d.sid, **d.token)))
        time.sleep(0.5)
        for d in self.devices:
            d.sock.close(0)


def rss_growth(samples: list[dict], warmup_s: float) -> dict:
    """RSS after warm-up (pure): the median of the first and of the last quarter of the samples after it and the
    growth between them (a leak; the medians ignore a pass's transient buffers), and the largest sample's growth."""
    after = [s["rss_mb"] for s in samples if s["t_s"] >= warmup_s]
    if not after:
        return {"baseline_mb": None, "final_mb": None, "max_mb": None, "growth": None, "max_growth": None}
    q = max(1, len(after) // 4)
    first, last = statistics.median(after[:q]), statistics.median(after[-q:])
    return {"baseline_mb": first, "final_mb": last, "max_mb": max(after), "growth": last / first - 1.0,
            "max_growth": max(after) / first - 1.0}


def stuck_sessions(waiting: dict[str, float], now: float, stuck_s: float) -> dict[str, float]:
    """Session -> seconds waited, for those waiting longer than ``stuck_s`` (pure)."""
    return {sid: now - t for sid, t in waiting.items() if now - t > stuck_s}


def soak(cfg: SoakConfig, endpoint: str, edge_pid: int, traces: list[Trace]) -> dict:
    """Drive the UEs for the duration, sampling the edge's RSS; the run's measurements."""
    devices = [Device(f"ue{i}", SLO_TOK_S, Cycle(traces, i)) for i in range(cfg.ues)]
    ctx = zmq.Context()
    loop = SoakLoop(ctx, endpoint, devices, cfg.draft_len, cfg.max_new_tokens, cfg.tau_d_ms / 1e3,
                    Limits(vocab_size=1 << 20))
    edge, samples, stuck, rounds = psutil.Process(edge_pid), [], {}, 0
    loop.start(cfg.stagger_s)
    next_sample = loop.t0
    while (now := time.perf_counter()) < loop.t0 + cfg.duration_s:
        loop.turn(loop)
        if now >= next_sample:
            rounds += sum(len(d.records) for d in devices)
            for d in devices:
                d.records.clear()  # counted: the soak keeps no per-round rows
            samples.append({"t_s": round(now - loop.t0, 3), "rss_mb": edge.memory_info().rss / MB, "rounds": rounds,
                            "prompts": loop.prompts_done})
            for sid, waited in stuck_sessions(loop.waiting(), now, cfg.stuck_s).items():
                stuck[sid] = max(waited, stuck.get(sid, 0.0))
            next_sample += cfg.sample_s
    rounds += sum(len(d.records) for d in devices)
    loop.close_all()
    ctx.term()
    errors = [e for d in devices for e in d.errors]
    return {"samples": samples, "rounds": rounds, "prompts": loop.prompts_done, "errors": len(errors),
            "error_examples": errors[:20], "stuck": stuck, "rss_after_close_mb": edge.memory_info().rss / MB}


def run(cfg: SoakConfig) -> dict:
    """Record the prompts, start the edge, soak, and write the JSON (and the config beside it)."""
    traces = make_traces(LoadConfig(draft_len=cfg.draft_len, max_new_tokens=cfg.max_new_tokens), cfg.prompts)
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    edge_cfg = ServeConfig(head="none", batch_verify=True, max_batch=cfg.max_batch,
                           max_draft_len=max(ServeConfig.max_draft_len, cfg.draft_len), bind="tcp://127.0.0.1:0")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    child = Child("edge", ["testbed.serve", *config.to_argv(edge_cfg)], out.with_name(out.stem + "_edge.log"))
    try:
        result = soak(cfg, child.wait_for("READY", 300), child.proc.pid, traces)
        result["edge_alive"] = child.proc.poll() is None
    finally:
        child.stop()
    rss = rss_growth(result["samples"], cfg.warmup_s)
    passed = bool(rss["growth"] is not None and rss["growth"] <= cfg.max_rss_growth and not result["stuck"]
                  and result["errors"] == 0 and result["edge_alive"] and result["rounds"] > 0)
    doc = {"config": asdict(cfg), "machine": machine_info(), "passed": passed, "rss": rss, **result}
    out.write_text(json.dumps(doc, indent=1))
    config.write_config_beside(out, cfg, doc["machine"])
    return doc


def report(doc: dict) -> str:
    """The soak's outcome in a few lines."""
    rss, c = doc["rss"], doc["config"]
    growth = "n/a" if rss["growth"] is None else f"{rss['growth']:+.2%}"
    return (f"soak: {c['ues']} UEs for {c['duration_s']:g} s: {doc['rounds']} rounds, {doc['prompts']} prompts, "
            f"{doc['errors']} errors, {len(doc['stuck'])} stuck sessions\n"
            f"edge RSS after {c['warmup_s']:g} s warm-up: {rss['baseline_mb'] or 0:.1f} MB -> "
            f"{rss['final_mb'] or 0:.1f} MB ({growth}, limit {c['max_rss_growth']:.0%}; largest sample "
            f"{rss['max_mb'] or 0:.1f} MB); after closing {doc['rss_after_close_mb']:.1f} MB\n"
            f"{'PASS' if doc['passed'] else 'FAIL'}")


def parse_args(argv: list[str] | None = None) -> SoakConfig:
    return config.parse(SoakConfig, argv, prog="python -m scripts.bench.soak", description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> dict:
    doc = run(parse_args(argv))
    print(report(doc), flush=True)
    return doc


if __name__ == "__main__":
    sys.exit(0 if main()["passed"] else 1)
