"""Real-scale shapes through the real testbed: random-weight models of named architectures, bytes, RSS, verify time.

Usage: ``python -m scripts.bench.scale [--shapes qwen|llama] [--protocols greedy fh sh reject] [--dtype bfloat16]``.
Writes random-weight HF directories of a real drafter/target pair's shapes (scripts/gpucheck/scale_shapes.py:
Qwen2.5-0.5B / 1.5B, or Llama-3.2-1B / 3.1-8B) to a temporary directory, with no tokenizer: both sides then declare only
the config's vocabulary size at OPEN (no hash), and the prompts are random token ids (a ``prompt_ids`` JSONL).  Each
protocol runs as one ``python -m testbed.run`` (its own edge and UE processes, loopback, by default no link emulation);
the process tree is sampled for each process's peak RSS (VmHWM).  Per protocol: bytes per round measured on the UE's
socket against the latency model's payload formulas (wire packing and the paper's), verify time per round, and the run's
summary.  Writes ``bench_scale.json`` (and ``bench_scale_config.toml`` beside it) and prints a table.  The Llama pair
needs about 16 GB for the 8B target in bf16 alone; the run refuses a pair whose weights do not fit in the available
memory.  A benchmark, not a test.
"""
from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
import psutil
import torch

import config
from scripts.gpucheck.scale_shapes import (
    PAIRS,
    ROUND_PROTOCOLS,
    Shape,
    compare_bytes,
    hf_config,
    param_count,
    random_prompts,
)
from testbed.common.machine import machine_info
from wisv.records.rows import read_records
from wisv.tasks.jsonl import write_jsonl
from wisv.timing.protodesc import round_names

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}  # bytes per weight
ROLES = {"testbed.serve": "edge", "testbed.ue": "ue"}  # module in a child's command line -> its role
NOT_RUN_HERE = ("The Llama-3.2-1B / Llama-3.1-8B shapes (--shapes llama) were not run on this machine: the 8B target "
                "alone is about 16 GB in bf16 (32 GB in fp32), and the 24 GB of RAM are shared by other users.")


@dataclass
class ScaleBenchConfig:
    """bench_scale settings (saved beside the JSON as bench_scale_config.toml)."""

    shapes: str = field(default="qwen", metadata={"choices": tuple(PAIRS)})  # pair: qwen (0.5B/1.5B), llama (1B/8B)
    protocols: list[str] = field(default_factory=lambda: list(ROUND_PROTOCOLS), metadata={
        "choices": round_names()})  # protocols, one testbed.run each
    prompts: int = 2  # random-token prompts per protocol
    prompt_len: int = 32  # tokens per prompt
    max_new_tokens: int = 12  # generation budget per prompt, tokens
    draft_len: int = 8  # K, draft tokens per round
    dtype: str = field(default="bfloat16", metadata={"choices": tuple(DTYPE_BYTES)})  # weights of both models
    head: str = field(default="none", metadata={
        "choices": ("none", "accept-all")})  # edge's head for fh/sh: none (greedy-equivalent, lossless) | accept-all
    rate_mbps: float = 0.0  # emulated link rate, both ways, Mbit/s (0: unlimited)
    rtt_ms: float = 0.0  # emulated round-trip time, ms (0 with rate 0: no emulator, UEs connect straight)
    seed: int = 0  # seed of the random weights, the prompts and the run
    sample_s: float = 0.2  # period of the RSS sampling of the run's processes, s
    work_dir: str | None = None  # parent of the temporary model directories (None: the system's temp dir)
    runs_dir: str | None = None  # keep each protocol's testbed.run output here (None: in the temp dir, deleted)
    out: str = "runs/bench_scale/bench_scale.json"  # the benchmark's JSON (committed: results/bench_scale/)


class RssSampler:
    """Samples the peak RSS (VmHWM) of a process and its descendants, by role, until stopped."""

    def __init__(self, pid: int, period_s: float):
        self.root, self.period_s = psutil.Process(pid), period_s
        self.peak_mb: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.period_s)

    def sample(self) -> None:
        try:
            procs = [self.root] + self.root.children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for p in procs:
            hwm = _vm_hwm_mb(p.pid)
            if hwm is not None:
                role = role_of(p)
                self.peak_mb[role] = max(self.peak_mb.get(role, 0.0), hwm)


def role_of(proc: psutil.Process) -> str:
    """edge, ue, or run (testbed.run itself, which also computes the target-only reference)."""
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return "other"
    return next((role for mod, role in ROLES.items() if mod in cmd), "run" if "testbed.run" in cmd else "other")


def _vm_hwm_mb(pid: int) -> float | None:
    """The process's peak resident set (VmHWM), MB; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next((ln for ln in text.splitlines() if ln.startswith("VmHWM:")), None)
    return int(line.split()[1]) / 1024 if line else None


def build_model(shape: Shape, path: Path, dtype: str, seed: int) -> None:
    """Save a random-weight model of ``shape`` (no tokenizer) as an HF directory."""
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(shape.model_type, **hf_config(shape)),
                                             dtype=getattr(torch, dtype))
    model.save_pretrained(path)
    del model
    gc.collect()


def check_memory(cfg: ScaleBenchConfig) -> dict:
    """Weights per process, GB; refuse a pair whose edge, UE and reference copies exceed the available memory."""
    drafter, target = PAIRS[cfg.shapes]
    gb = {s.name: param_count(s) * DTYPE_BYTES[cfg.dtype] / 1e9 for s in (drafter, target)}
    need, avail = gb[drafter.name] + 2 * gb[target.name], psutil.virtual_memory().available / 1e9
    if need > avail:
        raise SystemExit(f"bench_scale: {cfg.shapes} in {cfg.dtype} needs about {need:.1f} GB (drafter, target and "
                         f"the run's reference copy of the target), {avail:.1f} GB available")
    return {"weights_gb": gb, "needed_gb": need, "available_gb": avail}


def run_protocol(cfg: ScaleBenchConfig, proto: str, dirs: tuple[Path, Path], prompts: Path, out: Path) -> dict:
    """One ``testbed.run`` of ``proto``; its summary, bytes vs model, verify time and peak RSS per process."""
    args = [sys.executable, "-m", "testbed.run", "--protocol", proto, "--drafter", str(dirs[0]), "--target",
            str(dirs[1]), "--prompts-file", str(prompts), "--prompts", str(cfg.prompts), "--max-new-tokens",
            str(cfg.max_new_tokens), "--draft-len", str(cfg.draft_len), "--dtype", cfg.dtype, "--head", cfg.head,
            "--rate-mbps", str(cfg.rate_mbps), "--rtt-ms", str(cfg.rtt_ms), "--seed", str(cfg.seed),
            "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with RssSampler(proc.pid, cfg.sample_s) as rss:
        log = proc.communicate()[0]
    (out / "bench_scale.log").parent.mkdir(parents=True, exist_ok=True)
    (out / "bench_scale.log").write_text(log)
    if proc.returncode != 0:
        raise RuntimeError(f"testbed.run --protocol {proto} failed ({proc.returncode}):\n{log[-3000:]}")
    return protocol_result(cfg, proto, out, rss.peak_mb, time.perf_counter() - t0)


def protocol_result(cfg: ScaleBenchConfig, proto: str, out: Path, peak_mb: dict, wall_s: float) -> dict:
    """What the JSON keeps of one protocol's run."""
    drafter, target = PAIRS[cfg.shapes]
    rounds = read_records(out / proto / "rounds.csv")
    summary = json.loads((out / proto / "summary.json").read_text())
    return {"protocol": proto, "bytes": compare_bytes(proto, rounds, drafter.hidden, target.vocab, cfg.draft_len),
            "t_verify_ms_per_round": 1e3 * float(rounds["t_verify_s"].mean()),
            "t_draft_ms_per_round": 1e3 * float(rounds["t_draft_s"].mean()),
            "t_round_ms": 1e3 * float(rounds["t_round_s"].mean()),
            "peak_rss_mb": {k: peak_mb[k] for k in sorted(peak_mb)}, "wall_s": wall_s,
            "summary": {k: summary.get(k) for k in ("aal", "rounds_per_prompt", "latency_s", "matches_target",
                                                    "throughput_tok_s", "generated_tokens")}}


def table(results: list[dict]) -> str:
    """One line per protocol: bytes per round (measured, model, ratio), verify time, RSS, losslessness."""
    if not results:
        return "(no protocol run)"
    rows = [{"protocol": r["protocol"], "K": r["bytes"]["drafted_per_round"], "m": r["bytes"]["queried_per_round"],
             "up_B": r["bytes"]["up_bytes_measured"], "up_model_B": r["bytes"]["up_bytes_model"],
             "up_ratio": r["bytes"]["up_ratio"], "down_B": r["bytes"]["down_bytes_measured"],
             "down_model_B": r["bytes"]["down_bytes_model"], "down_ratio": r["bytes"]["down_ratio"],
             "up_B/tok": r["bytes"]["up_bytes_per_drafted_token"], "verify_ms": r["t_verify_ms_per_round"],
             "edge_MB": r["peak_rss_mb"].get("edge"), "ue_MB": r["peak_rss_mb"].get("ue"),
             "run_MB": r["peak_rss_mb"].get("run"), "matches": r["summary"]["matches_target"]} for r in results]
    return pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.4g}")


def numerics_check(target_dir: Path, prompts: list[dict], n: int, k: int, dtype: str) -> dict:
    """Does the edge's verification reproduce the target's token-by-token greedy output in ``dtype``?  Each prompt's
    reference is verified as a perfect drafter would send it (blocks of K through ``VerifySession``, as the edge
    does); counted: positions whose block argmax is the reference token.  Random weights give flat logits, whose
    top two can swap under bf16 rounding when a block is scored instead of one token: then matches_target < 1
    though every protocol is exact."""
    from wisv.decoding.sessions import VerifySession
    from wisv.models.loader import load_model
    from wisv.tasks.evaluate import greedy_reference
    model, same, total, gaps = load_model(target_dir, "target", "cpu", getattr(torch, dtype)), 0, 0, []
    for row in prompts:
        ref, sess, pos = greedy_reference(model, row["prompt_ids"], n), VerifySession(model, row["prompt_ids"]), 0
        while pos < len(ref):
            draft = ref[pos:pos + k]
            block = sess.verify(draft)
            want = ref[pos:pos + len(draft) + 1]
            same += sum(int(a == b) for a, b in zip(block.argmax.tolist(), want))
            total += len(want)
            top2 = block.logits.float().topk(2).values
            gaps += (top2[:, 0] - top2[:, 1]).tolist()
            if pos + len(draft) < len(ref):
                sess.commit(draft, len(draft), ref[pos + len(draft)])
            pos += len(draft) + 1
    del model
    gc.collect()
    return {"positions": total, "block_argmax_equals_reference": same,
            "median_top1_top2_logit_gap": float(torch.tensor(gaps).median())}


def run(cfg: ScaleBenchConfig) -> dict:
    memory, load_start = check_memory(cfg), os.getloadavg()[0]
    drafter, target = PAIRS[cfg.shapes]
    tmp = Path(tempfile.mkdtemp(prefix="bench_scale-", dir=cfg.work_dir))
    try:
        t0 = time.perf_counter()
        dirs = (tmp / "drafter", tmp / "target")
        for i, (shape, path) in enumerate(zip((drafter, target), dirs)):
            print(f"building random {shape.name} ({param_count(shape) / 1e9:.2f} B params, {cfg.dtype}) in {path}",
                  flush=True)
            build_model(shape, path, cfg.dtype, cfg.seed + i)
        build_s = time.perf_counter() - t0
        prompts = random_prompts(cfg.prompts, cfg.prompt_len, target.vocab, cfg.seed)
        write_jsonl(tmp / "prompts.jsonl", prompts)
        runs, results = Path(cfg.runs_dir) if cfg.runs_dir else tmp / "runs", []
        for proto in cfg.protocols:
            print(f"testbed.run --protocol {proto} ...", flush=True)
            results.append(run_protocol(cfg, proto, dirs, tmp / "prompts.jsonl", runs / proto))
        numerics = numerics_check(dirs[1], prompts, cfg.max_new_tokens, cfg.draft_len, cfg.dtype)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"config": asdict(cfg), "machine": machine_info(), "memory": memory, "build_s": build_s,
            "load_avg_1min": {"start": load_start, "end": os.getloadavg()[0]},  # other users of the cores
            "shapes": {"drafter": asdict(drafter) | {"params": param_count(drafter)},
                       "target": asdict(target) | {"params": param_count(target)}},
            "setup": {"tokenizer": "none: both sides declare the config's vocab_size at OPEN, no vocab_hash; "
                                   "prompts are random token ids (prompt_ids rows)",
                      "head": cfg.head, "link": "no emulation" if not (cfg.rate_mbps or cfg.rtt_ms) else
                      f"{cfg.rate_mbps:g} Mbit/s, RTT {cfg.rtt_ms:g} ms (user-space emulator)"},
            "numerics": numerics, "note": NOT_RUN_HERE if cfg.shapes != "llama" else "", "protocols": results}


def parse_args(argv: list[str] | None = None) -> ScaleBenchConfig:
    return config.parse(ScaleBenchConfig, argv, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    report = run(cfg)
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    config.write_config_beside(out, cfg, report["machine"])
    print(f"\n{PAIRS[cfg.shapes][0].name} drafter / {PAIRS[cfg.shapes][1].name} target, {cfg.dtype}, "
          f"K={cfg.draft_len}, head {cfg.head}; bytes per round (B), verify ms per round, peak RSS (MB)")
    print(table(report["protocols"]))
    n = report["numerics"]
    print(f"target in {cfg.dtype}: verifying its own greedy output in blocks of K gives it back at "
          f"{n['block_argmax_equals_reference']}/{n['positions']} positions (median top-1/top-2 logit gap "
          f"{n['median_top1_top2_logit_gap']:.3g})" + ("" if n["block_argmax_equals_reference"] == n["positions"]
                                                       else ": matches_target of greedy/fh/sh can be below 1"))
    if report["note"]:
        print(report["note"])
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
