"""Child processes of a run: start the edge and UEs, read their status lines, always stop them by PID."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path


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
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
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
                raise ChildError(f"{self.name} exited with {self.proc.returncode} before '{prefix}'; see {self.log_path}")
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
