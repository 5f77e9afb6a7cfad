"""Child processes of a run: start the edge and UEs, read their status lines, always stop them by PID.

Every child dies with this process (Linux: ``PR_SET_PDEATHSIG``, set between fork and exec; the kernel counts
the thread that started it as the parent, so children are started from the main thread), and every child not
yet stopped is listed, so that an interrupted run can stop them all (``stop_all``).
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1  # prctl option: the signal this process gets when its parent dies (linux/prctl.h)
_LIVE: dict[int, Child] = {}  # children started and not yet stopped, by PID
ON_START: list[Callable[[Child], None]] = []  # called with each child as it starts (orchestrate/cont.py records it)
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def die_with_parent(parent_pid: int) -> Callable[[], None] | None:
    """A preexec_fn asking the kernel to SIGTERM the child when its parent dies (None off Linux).  A parent that
    died before the call is caught by the PPID check."""
    if _LIBC is None:
        return None

    def preexec() -> None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)
    return preexec


def stop_all() -> list[int]:
    """Stop every child still running (by PID, youngest first); returns their PIDs."""
    children = list(_LIVE.values())[::-1]
    for child in children:
        child.stop()
    return [c.proc.pid for c in children]


class ChildError(RuntimeError):
    """A child process failed; the message points at its log."""


class Child:
    """One child Python process whose stdout lines are handed to a callback; stderr goes to a log file."""

    def __init__(self, name: str, args: list[str], log_path: Path, on_line: Callable[[str], None] | None = None,
                 prefix: list[str] | None = None):
        self.name, self.log_path = name, log_path
        self.log = log_path.open("w")
        cmd = (prefix or []) + [sys.executable, "-u", "-m", *args]
        self.log.write("$ " + " ".join(cmd) + "\n")
        self.log.flush()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1,
                                     preexec_fn=die_with_parent(os.getpid()))
        _LIVE[self.proc.pid] = self
        for note in ON_START:
            note(self)
        self.lines: list[str] = []
        self._on_line = on_line
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            self.log.write(line + "\n")
            self.log.flush()
            if self._on_line:
                self._on_line(line)

    def wait_for(self, prefix: str, timeout_s: float) -> str:
        """Block until a stdout line starts with ``prefix``; raise if the child dies or time runs out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            hit = next((ln for ln in self.lines if ln.startswith(prefix)), None)
            if hit:
                return hit[len(prefix):].strip()
            if self.proc.poll() is not None:
                raise ChildError(f"{self.name} exited with {self.proc.returncode} before '{prefix}'; "
                                 f"see {self.log_path}")
            time.sleep(0.02)
        raise ChildError(f"{self.name} printed no '{prefix}' within {timeout_s:.0f} s; see {self.log_path}")

    def wait(self, timeout_s: float | None = None) -> int:
        rc = self.proc.wait(timeout_s)
        self._reader.join(5)
        return rc

    def stop(self, grace_s: float = 5.0) -> None:
        """Terminate this child (by its own PID) if still running, then kill after a grace period."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _LIVE.pop(self.proc.pid, None)  # only once it is gone: an interrupted stop() is done again by stop_all()
        self._reader.join(5)
        self.log.close()


def progress_handler(bar) -> Callable[[str], None]:
    """A stdout callback that advances a tqdm bar on the UE's PROGRESS lines."""
    def on_line(line: str) -> None:
        if line.startswith("PROGRESS "):
            info = json.loads(line[len("PROGRESS "):])
            bar.update(1)
            if info.get("error"):
                bar.write(f"prompt {info['prompt_id']}: {info['error']}")
    return on_line


def wait_with_edge(ues: list[Child], edge: Child | None, poll_s: float = 0.2) -> None:
    """Wait until every UE process has exited; raise ChildError at once if the run's edge exits first (the run
    does not restart it: the UEs could only time out)."""
    while any(ue.proc.poll() is None for ue in ues):
        if edge is not None and (rc := edge.proc.poll()) is not None:
            raise ChildError(f"the edge exited (code {rc}) while the UEs ran{_last_line(edge)}; the run stops; "
                             f"see {edge.log_path}")
        time.sleep(poll_s)


def _last_line(child: Child) -> str:
    """': <the last line of a child's log>', or nothing."""
    lines = [ln for ln in child.log_path.read_text(errors="replace").splitlines() if ln.strip()]
    return f": {lines[-1].strip()}" if lines else ""
