"""REFERENCE off the serving loop: the target-only greedy outputs, cached by prompt and computed by a worker thread.

Generating a reference takes the target ``max_new_tokens`` forward passes; on the serving loop that stalls every
session's rounds.  Here the loop hands the job to ``ReferenceWorker`` and goes on serving; each reply is sent as soon
as its job is done (``done()``, polled by the loop every turn).  A peer has at most one REFERENCE outstanding, and the
worker's queue is bounded: beyond either, the edge answers ERROR ``busy`` at once.

``ReferenceCache`` keys outputs by prompt alone: greedy decoding with budget n is the first n tokens of decoding with
any larger budget, so one entry (the longest computed, or one that ended at EOS) answers every budget it covers, and a
longer budget's output replaces a shorter entry.
"""
from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("testbed.serve")
MAX_JOBS = 64  # REFERENCE jobs waiting for the worker, all peers together


@dataclass
class Entry:
    """A cached reference: the new tokens, and whether generation ended before its budget (EOS)."""

    tokens: list[int]
    complete: bool  # ended at EOS: the output for every larger budget too


class ReferenceCache:
    """Target-only outputs by prompt; the least recently used are dropped beyond ``size`` prompts."""

    def __init__(self, size: int):
        self.size, self.entries, self._lock = size, OrderedDict(), threading.Lock()

    def get(self, prompt: tuple[int, ...], n: int) -> list[int] | None:
        """The first ``n`` tokens of the output of ``prompt`` if the cached entry covers budget n; else None."""
        with self._lock:
            e = self.entries.get(prompt)
            if e is None or (len(e.tokens) < n and not e.complete):
                return None
            self.entries.move_to_end(prompt)
            return e.tokens[:n]

    def put(self, prompt: tuple[int, ...], n: int, tokens: list[int]) -> None:
        """Keep the output of budget ``n`` unless the entry already covers more."""
        with self._lock:
            old = self.entries.get(prompt)
            ended = len(tokens) < n  # stopped at EOS before the budget
            if old is None or ended or (not old.complete and len(tokens) > len(old.tokens)):
                self.entries[prompt] = Entry(list(tokens), ended)
            self.entries.move_to_end(prompt)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)


@dataclass
class Job:
    """One REFERENCE to compute: who asked (the reply's route), for which session id, what."""

    peer: bytes
    session: str
    prompt: tuple[int, ...]
    n: int  # max_new_tokens


Generate = Callable[[list[int], int], list[int]]  # (prompt ids, max_new_tokens) -> new tokens


class ReferenceWorker:
    """One thread computing REFERENCE jobs in arrival order; results are collected by the serving loop."""

    def __init__(self, generate: Generate, cache: ReferenceCache, max_jobs: int = MAX_JOBS):
        self.generate, self.cache = generate, cache
        self.jobs: queue.Queue[Job | None] = queue.Queue(maxsize=max_jobs)
        self.results: queue.Queue[tuple[Job, list[int] | Exception]] = queue.Queue()
        self.outstanding: set[bytes] = set()  # peers with a job queued or running (the loop's thread only)
        self.thread = threading.Thread(target=self._run, name="edge-references", daemon=True)
        self.thread.start()

    def submit(self, job: Job) -> str | None:
        """Queue a job; why not (the peer has one outstanding, or the queue is full), else None."""
        if job.peer in self.outstanding:
            return "this peer already has a REFERENCE being computed: one at a time"
        try:
            self.jobs.put_nowait(job)
        except queue.Full:
            return f"{self.jobs.maxsize} REFERENCE requests are waiting: send it again later"
        self.outstanding.add(job.peer)
        return None

    def done(self) -> list[tuple[Job, list[int] | Exception]]:
        """Jobs finished since the last call (their outputs are cached already)."""
        out = []
        while True:
            try:
                job, result = self.results.get_nowait()
            except queue.Empty:
                return out
            self.outstanding.discard(job.peer)
            out.append((job, result))

    @property
    def busy(self) -> bool:
        return bool(self.outstanding)

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            cached = self.cache.get(job.prompt, job.n)  # an earlier job may have computed it meanwhile
            try:
                result = cached if cached is not None else self.generate(list(job.prompt), job.n)
                if cached is None:
                    self.cache.put(job.prompt, job.n, result)
            except Exception as e:  # noqa: BLE001 - handed to the loop, which logs it and answers ERROR internal
                result = e
            self.results.put((job, result))

    def stop(self) -> None:
        """Finish the job running, drop the rest, end the thread."""
        while True:
            try:
                self.jobs.get_nowait()
            except queue.Empty:
                break
        self.jobs.put(None)
        self.thread.join(60)
