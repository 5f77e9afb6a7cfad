"""The GPU check (python -m scripts.gpucheck.run): its pure parts on hand-built inputs, the random-weight model
directories, the measured profiles by name, and the whole check at tiny shapes on the CPU (and on CUDA with a GPU)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from scripts.gpucheck import build, fits, hostfiles, report, table1
from scripts.gpucheck import bytes as gbytes
from scripts.gpucheck.env import profile_name
from scripts.gpucheck.lossless import NEAR_TIE_GAP, near_tie_tolerance
from scripts.gpucheck.plan import FULL, TINY, grid_points, prompt_ids, server_points
from wisv.models.loader import PairError, load_model
from wisv.timing.compute import get_architecture
from wisv.timing.hardware import HardwareProfile, get_profile, save_profile
from wisv.timing.roundtime import n_weights, t_verify_s

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "results" / "gpu" / "table1-traces"
CHECK_TIMEOUT_S = 900  # the tiny check takes about a minute on an idle 2-core VM; a loaded one can be 10x slower


def test_the_full_grid_is_the_issues_k_batch_prefix_product():
    pts = grid_points(FULL)
    assert len(pts) == 6 * 4 * 2 and {k for *_, k in pts} == {1, 4, 8, 16, 32, 64}
    assert {(b, p) for b, p, _ in pts} == {(b, p) for b in (1, 4, 16, 32) for p in (128, 1024)}
    assert FULL.target.hidden == 4096 and FULL.drafter.hidden == 2048


def test_prompt_ids_are_seeded_and_clear_of_special_ids():
    a, b = prompt_ids(3, 10, 512, 1), prompt_ids(3, 10, 512, 1)
    assert a == b and all(128 <= t < 512 for row in a for t in row)
    assert prompt_ids(1, 5, 128256, 0)[0][0] >= 1000


@pytest.mark.parametrize("agreements, want, picked", [([1.0, 0.9, 0.7, 0.2], 0.75, 0.1),
                                                      ([0.5, 0.4, 0.3, 0.1], 0.75, 0.01),
                                                      ([1.0, 1.0, 1.0, 0.9], 0.75, 1.0)])
def test_pick_sigma_takes_the_largest_noise_still_agreeing(agreements, want, picked):
    assert build.pick_sigma((0.01, 0.1, 0.5, 1.0), agreements, want) == picked


def test_head_agreement_falls_with_noise():
    g = torch.Generator().manual_seed(0)
    h, w, n = torch.randn(200, 16, generator=g), torch.randn(50, 16, generator=g), torch.randn(50, 16, generator=g)
    a = build.head_agreement(h, w, n, (0.0, 0.1, 10.0))
    assert a[0] == 1.0 and a[0] >= a[1] > a[2]


def test_near_tie_tolerance_is_a_few_bf16_ulps_and_fp32_keeps_its_gap():
    assert near_tie_tolerance(torch.float32, 5.0) == NEAR_TIE_GAP
    assert near_tie_tolerance(torch.bfloat16, 5.0) == pytest.approx(4 * 2.0 ** (2 - 7))  # 4 <= 5 < 8: ulp 2^-5
    assert near_tie_tolerance(torch.float16, 1.5) == pytest.approx(4 * 2.0 ** -10)


def test_random_weight_directories_give_the_same_model_in_every_process(tmp_path):
    a = build.build(TINY.drafter, tmp_path / "a", 3, "cpu", torch.float32)
    b = load_model(build.write_random_dir(TINY.drafter, tmp_path / "b", 3), "drafter", "cpu", torch.float32)
    c = build.build(TINY.drafter, tmp_path / "c", 4, "cpu", torch.float32)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.lm_head.weight, c.lm_head.weight)
    assert not list(tmp_path.rglob("*.safetensors"))  # nothing written but the config
    (tmp_path / "b" / "random_weights.json").write_text("{}")
    with pytest.raises(PairError, match="random_weights.json"):
        load_model(tmp_path / "b", "drafter", "cpu", torch.float32)


def test_the_noisy_head_drafter_shares_the_decoder():
    model = build.build(TINY.target, Path(os.environ.get("TMPDIR", "/tmp")) / "gpucheck-t", 0, "cpu", torch.float32)
    d = build.noisy_head_drafter(model, 0.2, 0)
    assert d.model is model.model and not torch.equal(d.lm_head.weight, model.lm_head.weight)
    assert d.lm_head.weight.shape == model.lm_head.weight.shape


def _rounds(protocol: str, rows: list[tuple[str, int, int]], scale: float = 1.0) -> pd.DataFrame:
    sh = gbytes.sh_overheads(TINY.drafter.hidden)
    bits = [gbytes.round_bits(p, k, m, gbytes.protocol_bits(p, TINY.drafter.hidden, TINY.drafter.vocab), sh)
            for p, k, m in rows]
    return pd.DataFrame({"protocol": [p for p, _, _ in rows], "drafted": [k for _, k, _ in rows],
                         "queried": [m for *_, m in rows], "uplink_bytes": [scale * u / 8 for u, _ in bits],
                         "downlink_bytes": [d / 8 for _, d in bits]})


@pytest.mark.parametrize("protocol, rows", [("greedy", [("greedy", 8, 0)] * 3), ("fh", [("fh", 8, 0), ("fh", 5, 0)]),
                                            ("sh", [("sh", 8, 2), ("sh", 8, 0)]), ("tree", [("tree", 16, 0)]),
                                            ("auto", [("fh", 8, 0), ("sh", 8, 3)])])
def test_bytes_check_is_one_when_the_wire_follows_the_model(protocol, rows):
    got = gbytes.bytes_check(protocol, _rounds(protocol, rows), TINY.drafter.hidden, TINY.drafter.vocab)
    assert got["up_ratio"] == pytest.approx(1.0) and got["down_ratio"] == pytest.approx(1.0)
    assert got["up_within_1pct"] and got["rounds"] == len(rows)


def test_bytes_check_sees_a_two_percent_excess():
    got = gbytes.bytes_check("fh", _rounds("fh", [("fh", 8, 0)], 1.02), TINY.drafter.hidden, TINY.drafter.vocab)
    assert got["up_ratio"] == pytest.approx(1.02) and not got["up_within_1pct"]


def test_goals_hold_the_check_to_the_issue_and_mark_the_gpu_timing_ones():
    rep = {"total_s": 300.0, "lossless": {"ok": True, "chain": {"aal": 2.0}},
           "estimator": {"test": {"r2": 0.995, "mape_pct": 6.0}},
           "e2e": {"protocols": [{"protocol": "fh", "verify_ms_per_round": 9.0, "summary": {"matches_target": 1.0,
                                                                                         "aal": 2.0},
                                  "bytes": {"up_ratio": 1.004, "down_ratio": 0.999, "up_bytes_per_round": 33000.0,
                                            "up_model_bytes_per_round": 32868.0, "down_bytes_per_round": 150.0,
                                            "down_model_bytes_per_round": 150.2}}]}}
    got = {g["measure"]: g for g in report.goals(rep)}
    assert got["whole check"]["met"] and got["estimator held-out R^2"]["met"]
    assert got["estimator held-out MAPE %"]["met"] is False and got["estimator held-out MAPE %"]["gpu_only"]
    assert got["uplink bytes/round vs payload model (worst |ratio - 1|)"]["value"] == pytest.approx(0.004)
    assert report.goals({})[0]["met"] is None
    md = report.markdown(rep | {"environment": {"device_name": "x"}})
    assert "## Goals" in md and "| fh | 3.3e+04 | 3.287e+04 | 1.004 |" in md


@pytest.mark.parametrize("name, want", [("NVIDIA H100 80GB HBM3", "h100-measured"), ("NVIDIA H200", "h200-measured"),
                                        ("x86_64", "cpu-measured"), ("NVIDIA L40S", "l40s-measured")])
def test_profile_name_of_a_device(name, want):
    assert profile_name(name) == want


def test_measured_profiles_resolve_by_name(tmp_path):
    assert get_profile("h100").peak_tflops == pytest.approx(989.4)
    prof = HardwareProfile("h100-measured", peak_tflops=989.4, eta=0.01, source="test", pass_overhead_s=0.002)
    save_profile(prof, tmp_path / "h100-measured.json")
    assert get_profile("h100-measured", measured_dir=tmp_path) == prof
    with pytest.raises(ValueError, match="h100-measured"):
        get_profile("h300", measured_dir=tmp_path)


def _grid(seconds) -> list[dict]:
    return [{"batch": b, "k": k, "prefix": p, "seconds": seconds(k, p)} for b in (1, 4) for k in (1, 8, 64)
            for p in (128, 1024)]


def test_measured_profile_recovers_an_eq11_device_and_the_a40_ratio_is_one_on_the_a40():
    dims, true = get_architecture("llama-3.1-8b"), HardwareProfile("x", 989.4, 0.02, "t", phase_overhead_s=0.004)
    prof, fit = fits.measured_profile(_grid(lambda k, p: t_verify_s(dims, p, k, true)), dims, "h100-measured",
                                      989.4, "test")
    assert prof.eta == pytest.approx(0.02, rel=1e-3)
    assert prof.call_overhead_s(n_weights(dims), 1) == pytest.approx(0.004, rel=1e-3)  # one call: 1, 1, nw collinear
    assert fit["method"].startswith("eq. 11") and prof.name == "h100-measured"
    a40 = get_profile("a40")
    ratios = fits.ratio_per_k(_grid(lambda k, p: t_verify_s(dims, p, k, a40)), dims)
    assert len(ratios) == 6 and all(r["ratio"] == pytest.approx(1.0) for r in ratios)


def test_measured_profile_falls_back_to_two_points_when_time_does_not_grow_with_k():
    dims = get_architecture("llama-3.2-1b")
    prof, fit = fits.measured_profile(_grid(lambda k, p: 0.02 - 1e-4 * k), dims, "cpu-measured", 1.0, "test")
    assert fit["method"].startswith("two-point") and 0 < prof.eta <= 1


def test_host_files_leave_out_the_smollm2_drafter_and_keep_the_check():
    tracked = ["wisv/assets/smollm2-drafter/layers.safetensors", "wisv/decoding/tree.py", "scripts/gpucheck/plan.py",
               "scripts/bench/scale.py", "results/gpu/table1-traces/table1.json", "docs/spec.md", "results/x.json",
               "wisv/assets/toy-pair/head/train_csi.png"]
    assert hostfiles.host_files(tracked) == ["wisv/decoding/tree.py", "scripts/gpucheck/plan.py",
                                             "results/gpu/table1-traces/table1.json"]


@pytest.mark.skipif(not (TRACES / "table1.json").is_file(), reason="no shipped Table I traces")
def test_table1_from_shipped_traces_reproduces_the_simulators_table():
    got = table1.table1(TRACES, {"a40": get_profile("a40")})
    committed = pd.read_csv(ROOT / "results" / "smollm2-head-table1" / "table.csv")
    committed = committed[committed["draft_len"].isin(json.loads((TRACES / "table1.json").read_text())["draft_lens"])]
    merged = got.merge(committed, on=["method", "draft_len", "link"])
    assert len(merged) == len(committed) == len(got) > 0
    assert merged["latency_s_a40"].to_numpy() == pytest.approx(merged["latency_s"].to_numpy(), rel=1e-9)
    assert merged["aal_x"].to_numpy() == pytest.approx(merged["aal_y"].to_numpy())


def _run_check(tmp_path: Path, device: str) -> tuple[subprocess.CompletedProcess, dict, float]:
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "scripts.gpucheck.run", "--device", device, "--tiny", "--out",
                             str(tmp_path / "out")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=CHECK_TIMEOUT_S)
    finally:
        if proc.poll() is None:  # timed out: the check, its edge and its runs are one process group
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done, json.loads((tmp_path / "out" / "gpu_check.json").read_text()), time.monotonic() - t0


def _check_tiny_report(rep: dict) -> None:
    assert not rep["errors"], rep["errors"]
    assert rep["lossless"]["ok"] and rep["lossless"]["chain"]["aal"] >= 1
    assert rep["lossless"]["chain"]["rounds_with_rejection"] > 0  # both acceptance and rejection exercised
    assert len(rep["grid"]) == len(grid_points(TINY)) and rep["estimator"]["test"]
    assert len(rep["server_grid"]) == len(server_points(TINY))
    assert [(r["batch"], r["k"]) for r in rep["server_only"]][:3] == [(1, TINY.draft_len), (1, TINY.draft_len),
                                                                       (2, TINY.draft_len)]
    assert all(r["decode_ms"] > 0 and r["verify_ms"] > 0 for r in rep["server_only"])
    assert {p["protocol"] for p in rep["e2e"]["protocols"]} == {"greedy", "fh", "sh", "auto", "tree"}
    for p in rep["e2e"]["protocols"]:
        assert abs(p["bytes"]["up_ratio"] - 1) <= 0.01, p
        assert p["summary"]["matches_target"] == 1.0, p  # --head none: every protocol is lossless
    assert rep["draft"]["ms_per_token"] > 0
    assert rep["profile"]["name"].endswith("-measured")


@pytest.mark.slow
def test_the_tiny_check_runs_every_stage_on_the_cpu(tmp_path):
    proc, rep, wall_s = _run_check(tmp_path, "cpu")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check_tiny_report(rep)
    assert (tmp_path / "out" / "gpu_check.md").read_text().startswith("# GPU check (tiny)")
    print(f"tiny check: {wall_s:.1f} s wall")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_tiny_check_runs_every_stage_on_cuda(tmp_path):
    proc, rep, _ = _run_check(tmp_path, "cuda")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check_tiny_report(rep)


def test_server_table_break_even_and_throughput():
    from scripts.gpucheck.serveronly import sd_throughput, server_table
    rows = [{"batch": 1, "prefix": 64, "k": 0, "seconds": 0.010}, {"batch": 1, "prefix": 64, "k": 8, "seconds": 0.015},
            {"batch": 4, "prefix": 64, "k": 0, "seconds": 0.020}, {"batch": 4, "prefix": 64, "k": 8, "seconds": 0.080}]
    t = server_table(rows, 8)
    assert [(r["batch"], round(r["break_even_aal"], 6)) for r in t] == [(1, 0.5), (4, 3.0)]
    assert t[1]["server_only_tok_per_s"] == pytest.approx(200.0)
    assert sd_throughput(t[1], 3.0) == pytest.approx(t[1]["server_only_tok_per_s"])  # break-even: equal throughput
    assert sd_throughput(t[0], 1.0) == pytest.approx(2 / 0.015)
    with pytest.raises(ValueError, match="K = 0 and K = 8"):
        server_table(rows[:1], 8)


def test_the_estimator_on_the_h200_grid_needs_its_per_sequence_term():
    # the first GPU check's grid (results/gpu/h200): time grew with the batch, not with K
    from scripts.gpucheck.fits import fit_estimator
    rows = json.loads((ROOT / "results/gpu/h200/gpu_check.json").read_text())["grid"]
    fit = fit_estimator(rows, seed=0, n_boot=10)
    assert fit["test_points"] == 9 and fit["test"]["r2"] > 0.7 and fit["coef"]["d_seq"] > 1e-3
