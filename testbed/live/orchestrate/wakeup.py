"""Hold a CPU wake-up latency bound (Linux PM QoS, /dev/cpu_dma_latency) while a run is in progress.

Each hop of a round (UE, link relay, edge) finds its process asleep and must wake a CPU.  On an idle VM
vCPU that wake-up costs ~0.1-0.3 ms (the vCPU halts, the host must reschedule it), so a round pays about
a millisecond that the link model does not know about.  Writing a bound to /dev/cpu_dma_latency keeps
the CPUs out of idle states slower than it for as long as the file stays open, as latency-tuned hosts do
(``tuned`` profile latency-performance); with 0 they poll instead of halting.  The kernel drops the
request when the file is closed, including when the process dies, so nothing outlives the run.  The
price is CPUs spinning while idle, so it is opt-in.
"""
from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator

QOS_DEVICE = "/dev/cpu_dma_latency"


@contextlib.contextmanager
def cpu_wakeup_bound(max_us: int | None, device: str = QOS_DEVICE) -> Iterator[str]:
    """Hold the bound (microseconds) for the block; None holds nothing.  Yields a one-line description.

    Raises PermissionError / FileNotFoundError with the reason when the request cannot be made."""
    if max_us is None:
        yield "cpu wake-up latency: system default"
        return
    if max_us < 0:
        raise ValueError(f"wake-up latency bound must be >= 0 us, got {max_us}")
    try:
        fd = os.open(device, os.O_WRONLY)
    except FileNotFoundError:
        raise FileNotFoundError(f"{device} does not exist (not Linux, or no PM QoS): run without "
                                "--cpu-wakeup-us") from None
    except PermissionError:
        raise PermissionError(f"{device} needs root to write: run as root or without --cpu-wakeup-us") from None
    try:
        os.write(fd, struct.pack("i", int(max_us)))
        yield f"cpu wake-up latency held at <= {max_us} us ({device}) for this run"
    finally:
        os.close(fd)  # the kernel drops the request with the last close
