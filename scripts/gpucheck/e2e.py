"""The testbed end to end: one ``testbed.serve`` with the target shape, then one ``testbed.run --edge`` per protocol
with the drafter shape's UE over the emulated link; bytes per round against the payload model, verify ms, matches."""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from scripts.gpucheck.build import write_random_dir
from scripts.gpucheck.bytes import bytes_check
from scripts.gpucheck.plan import Plan, prompt_ids
from wisv.records.rows import read_records
from wisv.tasks.jsonl import write_jsonl

READY_TIMEOUT_S = 300.0  # the edge must print READY within this (it builds the target first)


def serve_argv(target_dir: Path, device: str, dtype: str, plan: Plan) -> list[str]:
    return [sys.executable, "-m", "testbed.serve", "--target", str(target_dir), "--device", device, "--dtype", dtype,
            "--head", "none", "--bind", "tcp://127.0.0.1:0", "--memory-budget-mb", str(plan.memory_budget_mb)]


def run_argv(endpoint: str, drafter_dir: Path, prompts: Path, protocol: str, out: Path, device: str, dtype: str,
             plan: Plan, rate_mbps: float, rtt_ms: float) -> list[str]:
    return [sys.executable, "-m", "testbed.run", "--edge", endpoint, "--drafter", str(drafter_dir), "--device",
            device, "--dtype", dtype, "--protocol", protocol, "--prompts-file", str(prompts), "--prompts",
            str(plan.e2e_prompts), "--max-new-tokens", str(plan.e2e_new_tokens), "--draft-len", str(plan.draft_len),
            "--tree-budget", str(plan.tree_budget), "--rate-mbps", str(rate_mbps), "--rtt-ms", str(rtt_ms),
            "--out", str(out), "--overwrite"]


class Edge:
    """``testbed.serve`` as a child process: started, READY awaited, and stopped (SIGTERM, then kill) on exit."""

    def __init__(self, argv: list[str], log: Path):
        self.argv, self.log_path, self.lines = argv, log, queue.Queue()
        self.proc: subprocess.Popen | None = None
        self.endpoint = ""

    def __enter__(self) -> Edge:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.endpoint:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"testbed.serve printed no READY in {READY_TIMEOUT_S:g} s") from None
            if line is None:
                raise RuntimeError(f"testbed.serve exited ({self.proc.wait()}); see {self.log_path}")
            if line.startswith("READY "):
                self.endpoint = line.split()[1]
        return self

    def _pump(self) -> None:
        with open(self.log_path, "w") as log:
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                self.lines.put(line.strip())
        self.lines.put(None)

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_child(argv: list[str]) -> tuple[int, str]:
    """Run a child to its end, (exit status, its output); interrupted, it gets SIGTERM (a testbed.run then stops its
    own UEs and emulator) and, after 30 s, SIGKILL."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = proc.communicate()[0]
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    return proc.returncode, out


def protocol_result(protocol: str, out: Path, plan: Plan, wall_s: float) -> dict:
    """What the report keeps of one protocol's run: bytes vs model, verify and draft ms per round, matches."""
    rounds = read_records(out / protocol / "rounds.csv")
    summary = json.loads((out / protocol / "summary.json").read_text())
    return {"protocol": protocol, "wall_s": wall_s, "bytes": bytes_check(protocol, rounds, plan.drafter.hidden,
                                                                         plan.drafter.vocab),
            "verify_ms_per_round": 1e3 * float(rounds["t_verify_s"].mean()),
            "draft_ms_per_round": 1e3 * float(rounds["t_draft_s"].mean()),
            "round_ms": 1e3 * float(rounds["t_round_s"].mean()),
            "summary": {k: summary.get(k) for k in ("aal", "rounds_per_prompt", "latency_s", "matches_target",
                                                    "generated_tokens", "errors")}}


def certify_outputs(results: list[dict], work: Path, target_dir: Path, device: str, dtype: str) -> None:
    """Each protocol's outputs against the edge's target-only reference, a divergence certified as a near-tie the
    way the lossless stage does (scripts/gpucheck/lossless.py: the target in-process, the two tokens' logits at the
    first divergence within a few ulps): ``certified`` per protocol (prompts, identical, ok)."""
    import torch

    from scripts.gpucheck.lossless import certify
    from wisv.models.loader import load_model
    from wisv.tasks.jsonl import read_jsonl
    target = load_model(target_dir, "target", device, getattr(torch, dtype))
    for res in (r for r in results if "summary" in r):
        out = work / "runs" / res["protocol"]
        prompts = {r["prompt_id"]: r["prompt_ids"] for r in read_jsonl(out / "prompts.jsonl")}
        ref = {r["prompt_id"]: r["tokens"] for r in read_jsonl(out / "reference.jsonl")}
        checks = [certify(target, prompts[r["prompt_id"]], ref[r["prompt_id"]], r["tokens"])
                  for r in read_jsonl(out / res["protocol"] / "outputs.jsonl")]
        res["certified"] = {"prompts": len(checks), "identical": sum(c["identical"] for c in checks),
                            "ok": sum(c["ok"] for c in checks),
                            "divergences": [c for c in checks if not c["identical"]]}
    del target


def run_e2e(plan: Plan, work: Path, device: str, dtype: str, seed: int, protocols: tuple[str, ...],
            rate_mbps: float, rtt_ms: float) -> dict:
    """Serve the target once; run each protocol's UE against it over the emulated link."""
    target_dir = write_random_dir(plan.target, work / "target", seed)
    drafter_dir = write_random_dir(plan.drafter, work / "drafter", seed + 1)
    prompts = work / "prompts.jsonl"
    write_jsonl(prompts, [{"prompt_id": f"rand-{i}", "prompt_ids": ids} for i, ids in
                          enumerate(prompt_ids(plan.e2e_prompts, plan.prompt_len, plan.target.vocab, seed + 7))])
    results, t0 = [], time.perf_counter()
    with Edge(serve_argv(target_dir, device, dtype, plan), work / "serve.log") as edge:
        edge_s = time.perf_counter() - t0
        for proto in protocols:
            t1, out = time.perf_counter(), work / "runs" / proto
            argv = run_argv(edge.endpoint, drafter_dir, prompts, proto, out, device, dtype, plan, rate_mbps, rtt_ms)
            rc, log = run_child(argv)
            (work / f"run-{proto}.log").write_text(log)
            if rc != 0:
                results.append({"protocol": proto,
                                "error": f"testbed.run exited {rc}: {log.strip().splitlines()[-1:]}"})
                continue
            results.append(protocol_result(proto, out, plan, time.perf_counter() - t1))
    certify_outputs(results, work, target_dir, device, dtype)  # after the edge is gone: its memory is free again
    return {"link": {"rate_mbps": rate_mbps, "rtt_ms": rtt_ms}, "edge_ready_s": edge_s, "protocols": results,
            "target": plan.target.name, "drafter": plan.drafter.name, "d_drafter": plan.drafter.hidden}
