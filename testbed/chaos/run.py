"""The chaos harness's shell: a batching edge (the pair's default head, ``--journal``), the link emulator replaying a
varying trace with the scheduled link faults, N UEs with mixed protocols in waves of prompts, and a thread per fault.

Process faults: the edge SIGKILLed and restarted on its port, or SIGSTOPped a few seconds; a UE SIGSTOPped, or
SIGKILLed and restarted on its wave with ``--keep-done`` (its unfinished prompt starts again).  Probes from
testbed/hostile/probes.py run against the edge beside the UEs.  A UE whose wave ends starts the next one until the
schedule is over; then every wave must finish.  testbed/chaos/check.py judges what is left on disk.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import socket
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import zmq

from channel.emulator import LinkEmulator
from testbed.chaos.check import Wave
from testbed.chaos.schedule import Draw, Fault, draw_schedule, link_trace, trace_csv
from testbed.common.files import complete_lines
from testbed.common.link import LinkSpec
from testbed.hostile.probes import PROBES, Target, rss_bytes
from testbed.live.orchestrate.procs import Child
from wisv.tasks.jsonl import write_jsonl

MIX = (("greedy", []), ("fh", []), ("sh", []), ("auto", []), ("tree", []),
       ("greedy", ["--draft-len", "auto"]))  # UE u runs MIX[u % 6]
TARGET_WAIT_S = 120.0  # the emulator holds a UE that dials while the edge restarts, as a real host's port comes back
#                        (not hung up mid-handshake, which a UE's first dial reads as a refused key), s


@dataclass
class Shell:
    """What the fault threads and the supervisor share."""

    cfg: object  # ChaosConfig
    out: Path  # the harness's output directory
    port: int  # the edge's fixed port (a restart binds it again)
    edge: Child | None = None  # the edge process now
    link_t0: float = 0.0  # time.time() the link trace started
    endpoint: str = ""  # where UEs connect (the emulator)
    calls: queue.Queue = field(default_factory=queue.Queue)  # work for the main thread: (fn, done event, result)
    locks: dict = field(default_factory=dict)  # target -> lock held through a fault (a restart takes its load time)
    errors: list = field(default_factory=list)  # what failed on the main thread for a fault thread (fatal)

    def lock(self, target: str) -> threading.Lock:
        return self.locks.setdefault(target, threading.Lock())

    def on_main(self, fn):
        """Run ``fn()`` on the main thread and return its result: children are started there only (a child dies
        when the thread that started it ends: PR_SET_PDEATHSIG, testbed/live/orchestrate/procs.py)."""
        done, result = threading.Event(), {}
        self.calls.put((fn, done, result))
        done.wait()
        if "error" in result:
            raise result["error"]
        return result.get("value")

    def serve_calls(self) -> None:
        """Run what the fault threads asked of the main thread."""
        while not self.calls.empty():
            fn, done, result = self.calls.get()
            try:
                result["value"] = fn()
            except Exception as e:  # noqa: BLE001 - the fault thread re-raises it; the harness stops on it
                result["error"] = e
                self.errors.append(e)
            finally:
                done.set()


class UE:
    """One UE slot: its waves, one process at a time."""

    def __init__(self, u: int, shell: Shell, rows: list[dict]):
        self.u, self.shell, self.rows = u, shell, rows
        self.protocol, self.extra = MIX[u % len(MIX)]
        self.wave, self.child, self.waves = -1, None, []
        self.lock = threading.Lock()  # a fault and the supervisor do not restart it at once
        self.killing = False  # a ue_kill fault is restarting it

    def start(self, keep_done: bool = False) -> None:
        """Start the next wave, or with ``keep_done`` the current one again."""
        c = self.shell.cfg
        if not keep_done:
            self.wave += 1
            n = len(self.rows)
            first = (self.u * 5 + self.wave * c.prompts_per_wave) % n
            prompts = [self.rows[(first + k) % n] for k in range(c.prompts_per_wave)]
            self.waves.append(Wave(self.u, f"ue{self.u}w{self.wave}", self.protocol,
                                   [str(p["prompt_id"]) for p in prompts]))
            self.dir.mkdir(parents=True, exist_ok=True)
            write_jsonl(self.dir / "prompts.jsonl", prompts)
        n = len(list(self.dir.glob("ue*.log")))  # one log per start: a restart keeps what the last one said
        self.child = Child(f"ue{self.u}", self._args(keep_done), self.dir / f"ue{n}.log")

    @property
    def dir(self) -> Path:
        return self.shell.out / f"ue{self.u}" / f"w{self.wave}"

    def _args(self, keep_done: bool) -> list[str]:
        c, s = self.shell.cfg, self.shell
        link = LinkSpec(csi_trace=str(s.out / "trace.csv"), seed=c.seed)
        return ["testbed.ue", "--connect", s.endpoint, "--prompts-file", str(self.dir / "prompts.jsonl"),
                "--prompts", str(c.prompts_per_wave), "--out", str(self.dir), "--ue-id", self.waves[-1].ue_id,
                "--protocol", self.protocol, *self.extra, "--max-new-tokens", str(c.max_new_tokens),
                "--probe-bytes", "0", "--no-reference", "--link-json", json.dumps(asdict(link)),
                "--link-t0-epoch-s", str(s.link_t0), "--heartbeat-ivl-ms", str(c.heartbeat_ivl_ms),
                "--heartbeat-timeout-ms", str(c.heartbeat_timeout_ms), "--recv-timeout-s", "5", "--retry-s", "300",
                "--seed", str(c.seed), *(["--drafter", c.drafter] if c.drafter else []),
                *(["--keep-done"] if keep_done else [])]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_edge(shell: Shell) -> float:
    """Start the edge on its port; returns seconds until READY (its model load)."""
    c, t0 = shell.cfg, time.monotonic()
    args = ["testbed.serve", "--bind", f"tcp://127.0.0.1:{shell.port}", "--batch-verify", "--journal",
            str(shell.out / "journal.jsonl"), "--heartbeat-timeout-ms", str(c.heartbeat_timeout_ms),
            *(["--target", c.target] if c.target else [])]
    n = len(list(shell.out.glob("edge*.log")))
    shell.edge = Child("edge", args, shell.out / f"edge{n}.log")
    shell.edge.wait_for("READY", 300)
    return time.monotonic() - t0


def inject(f: Fault, shell: Shell, ues: list[UE], t0: float, done: list) -> None:
    """Run one fault at its time; append what happened (kind, start, end, touched UEs, bound) to ``done``."""
    time.sleep(max(0.0, t0 + f.t_s - time.time()))
    with shell.lock(f.target if f.kind != "probe" else "probe"):  # one fault at a time per target, restarts included
        _inject(f, shell, ues, done)


def _inject(f: Fault, shell: Shell, ues: list[UE], done: list) -> None:
    start, bound, touched = time.time(), f.duration_s + 5.0, None
    try:
        if f.kind == "edge_kill":
            shell.edge.proc.kill()
            shell.edge.proc.wait()
            shell.edge.stop()
            bound = shell.on_main(lambda: start_edge(shell)) + 5.0  # its model load + 5 s
        elif f.kind in ("edge_stop", "ue_stop"):
            proc = shell.edge.proc if f.kind == "edge_stop" else ues[int(f.target[2:])].child.proc
            _signal(proc, signal.SIGSTOP)
            time.sleep(f.duration_s)
            _signal(proc, signal.SIGCONT)
        elif f.kind == "ue_kill":
            touched = [int(f.target[2:])]
            shell.on_main(lambda: _kill_ue(ues[touched[0]]))
        elif f.kind == "probe":
            stop = threading.Event()
            th = threading.Thread(target=_probe, args=(f.target, shell.port, stop), daemon=True)
            th.start()
            time.sleep(f.duration_s)
            stop.set()
            th.join(30)
        else:  # link faults are in the trace: wait for the end
            time.sleep(f.duration_s)
    finally:
        if touched is None:
            touched = [int(f.target[2:])] if f.target.startswith("ue") else [u.u for u in ues]
        done.append({**f.to_dict(), "start": start, "end": time.time(), "touched": touched, "bound_s": bound,
                     "ue_id": ues[touched[0]].waves[-1].ue_id if f.kind == "ue_kill" else None})


def _probe(name: str, port: int, stop: threading.Event) -> None:
    """Run one probe against the edge's own port; one that gives up early (no answer while the edge is down or
    stopped: zmq.Again) ends the probe, not the harness."""
    try:
        PROBES[name](Target(f"tcp://127.0.0.1:{port}"), stop)
    except zmq.ZMQError:
        pass


def _signal(proc, sig: int) -> None:
    """Signal a process the harness started, if it still runs (a UE between waves has none)."""
    pid = getattr(proc, "pid", None)
    if pid is not None and proc.poll() is None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _kill_ue(ue: UE) -> None:
    with ue.lock:
        ue.killing = True
        if isinstance(ue.child, _Done):  # its last wave ended: nothing to kill
            ue.killing = False
            return
        if ue.child.proc.poll() is None:
            ue.child.proc.kill()
            ue.child.proc.wait()
        ue.child.stop()
        ue.start(keep_done=True)  # the same wave: its complete prompts kept, the rest (the cut one first) again
        ue.killing = False


def supervise(ues: list[UE], until: float, problems: list[str]) -> None:
    """Start each UE's next wave when one ends, until ``until`` (time.time()); a UE that failed is noted and its
    wave continued."""
    for ue in ues:
        with ue.lock:
            rc = ue.child.proc.poll()
            if rc is None or ue.killing:
                continue
            ue.child.stop()
            if rc != 0:
                problems.append(_exit_problem(ue, rc))
                ue.start(keep_done=True)
            elif time.time() < until:
                ue.start()
            else:
                ue.child = _Done()


HUNG_UP = "the edge refused the connection: handshake failed (errno"  # live/common/auth.py, the UE's first dial


def _exit_problem(ue: UE, rc: int) -> str:
    """A UE's failed exit as a violation, or (``note:``) one the UE's contract allows: its first dial found the edge
    restarting behind the emulator, which hangs up mid-handshake (a UE fails fast at its start; its wave goes on)."""
    log = ue.child.log_path.read_text(errors="replace")
    what = f"ue{ue.u} wave {ue.wave} exited with {rc}; see {ue.child.log_path}"
    return f"note: {what} (its first dial met the edge restarting)" if rc == 2 and HUNG_UP in log else f"stuck: {what}"


class _Done:
    """A UE slot whose last wave ended."""

    class proc:  # noqa: N801 - quacks like Popen
        @staticmethod
        def poll() -> int:
            return 0

    def stop(self) -> None:
        pass


class Watcher:
    """Polls the UEs' rounds.jsonl (commit times per UE) and the edge's RSS, in a thread."""

    def __init__(self, shell: Shell, ues: list[UE]):
        self.shell, self.ues = shell, ues
        self.commits: dict[int, list[tuple[float, int]]] = {u.u: [] for u in ues}  # (time, wave) per round
        self.rss: list[tuple[float, int, int]] = []
        self._seen: dict[Path, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last_rss = 0.0
        while not self._stop.wait(0.1):
            now = time.time()
            for ue in self.ues:
                path = ue.dir / "rounds.jsonl"
                n = _lines(path)
                if n > self._seen.get(path, 0):
                    self.commits[ue.u] += [(now, ue.wave)] * (n - self._seen.get(path, 0))
                self._seen[path] = n
            if now - last_rss >= 1.0 and self.shell.edge is not None:
                try:
                    self.rss.append((now, self.shell.edge.proc.pid, rss_bytes(self.shell.edge.proc.pid)))
                except OSError:
                    pass
                last_rss = now

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def execute(cfg, out: Path, rows: list[dict]) -> dict:
    """Run the schedule of ``cfg.seed``; returns what the checker needs."""
    faults = draw_schedule(cfg.seed, Draw(cfg.duration_s, cfg.warmup_s, cfg.mean_gap_s, cfg.ues, cfg.max_outage_s))
    (out / "trace.csv").write_text(trace_csv(link_trace(cfg.seed, faults, cfg.duration_s + cfg.settle_s)))
    shell = Shell(cfg, out, free_port())
    try:
        return _execute(cfg, out, rows, faults, shell)
    finally:
        if shell.edge is not None:
            shell.edge.stop()


def _execute(cfg, out: Path, rows: list[dict], faults: list[Fault], shell: Shell) -> dict:
    load_s = start_edge(shell)
    link = LinkSpec(csi_trace=str(out / "trace.csv"), seed=cfg.seed)
    done, problems, ues = [], [], []
    with LinkEmulator(replace(link.emulator_config(shell.port), target_wait_s=TARGET_WAIT_S)) as emu:
        shell.endpoint, shell.link_t0 = emu.endpoint, emu.t0_epoch_s
        watch, t0 = None, emu.t0_epoch_s
        threads = []
        try:
            ues += [UE(u, shell, rows) for u in range(cfg.ues)]
            for ue in ues:
                ue.start()
            watch = Watcher(shell, ues)
            threads = [threading.Thread(target=inject, args=(f, shell, ues, t0, done), daemon=True) for f in faults]
            for th in threads:
                th.start()
            while time.time() < t0 + cfg.duration_s or any(th.is_alive() for th in threads):
                shell.serve_calls()
                if shell.errors:
                    raise shell.errors[0]
                supervise(ues, t0 + cfg.duration_s, problems)
                time.sleep(0.1)
            deadline = time.time() + cfg.settle_s
            while any(u.child.proc.poll() is None for u in ues) and time.time() < deadline:
                supervise(ues, 0.0, problems)
                time.sleep(0.2)
            supervise(ues, 0.0, problems)
            problems += [f"stuck: ue{u.u} wave {u.wave} still running {cfg.settle_s:g} s after the schedule"
                         for u in ues if u.child.proc.poll() is None]
            time.sleep(1.0)  # the last CLOSEs reach the journal
        finally:
            if watch is not None:
                watch.stop()
            for u in ues:
                if u.child is not None:
                    u.child.stop()
    waves = [w for u in ues for w in u.waves]
    for u in ues:
        for w, wave in enumerate(u.waves):
            d = out / f"ue{u.u}" / f"w{w}"
            wave.outputs, wave.rounds = complete_lines(d / "outputs.jsonl"), complete_lines(d / "rounds.jsonl")
    return {"schedule": faults, "faults": done, "waves": waves, "problems": problems, "commits": watch.commits,
            "rss": watch.rss, "edge_load_s": load_s, "wall_s": time.time() - t0}
