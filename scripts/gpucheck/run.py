"""``python -m scripts.gpucheck.run --out DIR``: one command that checks and times the CUDA path on a GPU host.

Random-weight Llama-3.1-8B (target) and Llama-3.2-1B (drafter) shapes built in memory from their configs: lossless
chain and tree SD at scale, the verification-time grid with WISP's estimator and this GPU's measured profile (and
the measured / a40 ratio per K), draft ms per token, the testbed end to end (``testbed.serve`` + ``testbed.run
--edge`` over the emulated link), and Table I over the SmolLM2 pair's shipped traces with the measured profile.
Writes ``DIR/gpu_check.json``, ``DIR/gpu_check.md`` and ``DIR/<gpu>-measured.json``.  ``--device cpu --tiny`` runs
the same code at toy shapes (the test suite does).  ``--wheels DIR`` first installs the missing packages from
``make gpu-wheels``'s folder with ``pip --no-index``.  Exit 1 when a stage failed or a goal was missed.
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import config

WHEEL_PACKAGES = ("pyzmq", "scapy", "rouge-score", "gguf")  # what a GPU host lacks (make gpu-wheels)
STAGE_NAMES = ("lossless", "grid", "server", "draft", "e2e", "table1")


@dataclass
class GpuCheckConfig:
    """gpu_check settings (saved beside the report as config.toml)."""

    out: str = "runs/gpu-check"  # report directory
    device: str = "cuda"  # torch device: cuda (the check) | cpu (with --tiny: the test suite's run)
    tiny: bool = False  # toy shapes and a small grid: the same code in about a minute on a CPU
    dtype: str = field(default="auto", metadata={
        "choices": ("auto", "bfloat16", "float16", "float32")})  # weights (auto: bf16 on CUDA, fp32 on CPU)
    seed: int = 0  # weights, prompts and drafter noise
    stages: list[str] = field(default_factory=lambda: list(STAGE_NAMES), metadata={
        "choices": STAGE_NAMES})  # stages to run, in this order
    traces: str = "results/gpu/table1-traces"  # Table I's acceptance traces (SmolLM2 pair) and their manifest
    rate_mbps: float = field(default=20.0, metadata={"above": 0})  # the testbed's emulated link rate, Mbit/s
    rtt_ms: float = field(default=20.0, metadata={"min": 0})  # its round-trip time, ms
    wheels: str | None = None  # install the missing packages from this wheel folder first (pip --no-index)


def install_wheels(folder: str) -> None:
    """pip install the host's missing packages from ``folder`` only (no network)."""
    if not Path(folder).is_dir():
        raise FileNotFoundError(f"--wheels {folder}: no such folder (make gpu-wheels writes it)")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", folder,
                    *WHEEL_PACKAGES], check=True)


def run(cfg: GpuCheckConfig) -> dict:
    import torch  # after --wheels: nothing below needs the wheels before here

    from scripts.gpucheck.env import environment
    from scripts.gpucheck.plan import plan_for
    from scripts.gpucheck.report import goals, markdown
    from scripts.gpucheck.stages import STAGES, State
    from wisv.models.loader import resolve_dtype
    t0, out = time.perf_counter(), Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False  # fewer near-ties
    plan = plan_for(cfg.tiny)
    st = State(plan, out, cfg.device, resolve_dtype(cfg.dtype, cfg.device), cfg.seed, Path(cfg.traces),
               cfg.rate_mbps, cfg.rtt_ms)
    st.report |= {"config": asdict(cfg), "plan": {"name": plan.name, "target": plan.target.name,
                                                   "drafter": plan.drafter.name} | _sizes(plan),
                  "environment": environment(cfg.device), "stage_s": {}, "errors": {}}
    for name in (s for s in STAGES if s in cfg.stages):
        t1 = time.perf_counter()
        print(f"[{time.perf_counter() - t0:6.1f} s] {name} ...", flush=True)
        try:
            STAGES[name](st)
        except Exception as e:  # one stage's failure is reported; the others still run
            st.report["errors"][name] = f"{type(e).__name__}: {e}"
            (out / f"{name}.traceback.txt").write_text(traceback.format_exc())
        st.report["stage_s"][name] = round(time.perf_counter() - t1, 2)
        st.report["total_s"] = round(time.perf_counter() - t0, 2)
        _write(st.report, out)
    st.report["goals"] = goals(st.report)
    _write(st.report, out)
    (out / "gpu_check.md").write_text(markdown(st.report))
    return st.report


def _sizes(plan) -> dict:
    return {k: getattr(plan, k) for k in ("prompts", "new_tokens", "draft_len", "tree_budget", "ks", "batches",
                                          "prefixes", "server_batches", "e2e_prompts", "e2e_new_tokens")}


def _write(report: dict, out: Path) -> None:
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str) + "\n")


def parse_args(argv: list[str] | None = None) -> GpuCheckConfig:
    ap = config.add_flags(argparse.ArgumentParser(prog="python -m scripts.gpucheck.run",
                                                  description=__doc__.splitlines()[0]), GpuCheckConfig)
    return config.parse(GpuCheckConfig, argv, ap)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` on the host: stop the edge and the runs too
    report: dict = {}

    def body() -> None:
        if cfg.wheels:
            install_wheels(cfg.wheels)
        report.update(run(cfg))
        config.write_config(cfg.out, cfg)
    if config.run_reporting("python -m scripts.gpucheck.run", body):
        return 2
    print((Path(cfg.out) / "gpu_check.md").read_text())
    missed = [g["measure"] for g in report["goals"] if g["met"] is False and not (cfg.tiny and g["gpu_only"])]
    return 1 if report["errors"] or missed else 0


if __name__ == "__main__":
    sys.exit(main())
