"""The check's stages in the order GPU memory allows: each takes the shared state and returns its part of the report."""
from __future__ import annotations

import gc
from dataclasses import dataclass, field
from pathlib import Path

import torch

from scripts.gpucheck import build, draft, e2e, fits, grid, lossless, serveronly, table1
from scripts.gpucheck.env import profile_name
from scripts.gpucheck.plan import E2E_PROTOCOLS, Plan, prompt_ids, server_points
from wisv.timing.compute import ModelDims
from wisv.timing.hardware import PROFILES, HardwareProfile, get_profile, save_profile

CPU_PEAK_TFLOPS = 1.0  # a nominal peak for a CPU's measured profile (eta is then R / 1 TFLOP/s)


@dataclass
class State:
    """What the stages share: the plan, where to write, the device and the models while they are needed."""

    plan: Plan  # shapes and sizes
    out: Path  # the report's directory
    device: str  # torch device
    dtype: torch.dtype  # weights of every model
    seed: int  # weights, prompts, noise
    traces: Path  # Table I's shipped traces
    rate_mbps: float  # the testbed's emulated link
    rtt_ms: float  # its RTT
    report: dict = field(default_factory=dict)  # the JSON report, filled stage by stage
    target: object = None  # the target model, built by the lossless stage (or the grid's when that is skipped)

    def target_model(self):
        if self.target is None:
            self.target = build.build(self.plan.target, self.out / "models" / "target", self.seed, self.device,
                                      self.dtype)
        return self.target

    def free_target(self) -> None:
        self.target = None
        gc.collect()
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()


def lossless_stage(st: State) -> None:
    p, target = st.plan, st.target_model()
    prompts = prompt_ids(p.prompts, p.prompt_len, p.target.vocab, st.seed)
    drafter, info = build.calibrated_drafter(target, prompts, p.noise_sigmas, p.agreement, st.seed + 1,
                                             p.drafter_logit_std)
    st.report["drafter"] = info
    st.report["lossless"] = lossless.run_lossless(target, drafter, prompts, p.new_tokens, p.draft_len, p.tree_budget)
    del drafter


def grid_stage(st: State) -> None:
    target = st.target_model()
    rows = grid.time_grid(target, st.plan, st.device, st.seed)
    dims = ModelDims.from_hf_config(target.config)
    st.report["grid"] = rows
    st.report["estimator"] = fits.fit_estimator(rows, st.seed)
    st.report["ratio_a40"] = fits.ratio_per_k(rows, dims, "a40")
    name = profile_name(st.report["environment"]["device_name"])
    spec = PROFILES.get(name.removesuffix("-measured"))
    prof, quality = fits.measured_profile(
        rows, dims, name, spec.peak_tflops if spec else CPU_PEAK_TFLOPS,
        f"measured by python -m scripts.gpucheck.run on {st.report['environment']['device_name']} "
        f"({st.plan.name} plan, "
        f"{st.plan.target.name}, {str(st.dtype).removeprefix('torch.')}): batch-1 verification grid")
    save_profile(prof, st.out / f"{name}.json")
    st.report["profile"], st.report["profile_fit"] = prof.to_dict(), quality
    st.free_target()


def server_stage(st: State) -> None:
    """Server-only against speculation: a decode step alone against a verification pass of K + 1 rows, at batch
    sizes 1 to 32 (the target's shape; timed as the grid is)."""
    rows = grid.time_grid(st.target_model(), st.plan, st.device, st.seed + 5, server_points(st.plan))
    st.report["server_grid"] = rows
    st.report["server_only"] = serveronly.server_table(rows, st.plan.draft_len)
    st.free_target()


def draft_stage(st: State) -> None:
    p = st.plan
    model = build.build(p.drafter, st.out / "models" / "drafter", st.seed + 1, st.device, st.dtype)
    prompt = prompt_ids(1, p.prompt_len, p.drafter.vocab, st.seed + 3)[0]
    st.report["draft"] = draft.draft_ms_per_token(model, prompt, p.draft_tokens, 5, st.device)
    del model
    st.free_target()


def e2e_stage(st: State) -> None:
    st.free_target()
    dtype = str(st.dtype).removeprefix("torch.")
    st.report["e2e"] = e2e.run_e2e(st.plan, st.out / "e2e", st.device, dtype, st.seed, E2E_PROTOCOLS, st.rate_mbps,
                                   st.rtt_ms)


def table1_stage(st: State) -> None:
    edges = {"a40": get_profile("a40")}  # the paper's edge, spec sheet; then this GPU's spec sheet and measurement
    if "profile" in st.report:
        name = st.report["profile"]["name"]
        if name.removesuffix("-measured") in PROFILES:
            edges[name.removesuffix("-measured")] = PROFILES[name.removesuffix("-measured")]
        edges[name] = HardwareProfile.from_dict(st.report["profile"])
    df = table1.table1(st.traces, edges)
    df.to_csv(st.out / "table1.csv", index=False)
    st.report["table1"] = df.to_dict(orient="records")


STAGES = {"lossless": lossless_stage, "grid": grid_stage, "server": server_stage, "draft": draft_stage,
          "e2e": e2e_stage, "table1": table1_stage}  # in run order
