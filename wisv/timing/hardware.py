"""Hardware profiles as data: peak tensor throughput and utilisation of the UE and edge devices (SPEC eq. 11).

``eta`` is the fraction of the dense FP16/BF16 tensor peak that LLM decoding actually reaches.
Decoding is memory-bound: a pass over ``n`` tokens reads every weight once (2 bytes in fp16) and
does about 2 FLOPs per weight per token, i.e. ~``n`` FLOPs per byte, far below the ridge point
of these GPUs (peak / bandwidth = 150-330 FLOPs per byte).  The roofline bound is therefore
``eta <= n * bandwidth / peak`` (``roofline_eta``).  Built-in profiles use that bound with
``n = 1`` for a drafting UE (one token per forward) and ``n = 8`` for a verifying edge (a K = 8
block per forward), which gives eta of 0.005-0.05.  Larger values (e.g. 0.1-0.3) would predict
drafting faster than the weights can be read (a 1B fp16 drafter on Orin: 2.5 GB / 204.8 GB/s
~ 12 ms/token at best).  The bound ignores kernel-launch and framework overhead, so real eager
runs are slower still; a measured ``local`` profile (``save_profile``/``load_profile``) should
replace these defaults whenever a device is available.

Per-call costs: tiny models on a CPU are dominated by what every forward call pays regardless of its
token count, not by FLOPs, so a profile may add ``pass_overhead_s`` per forward call (framework
dispatch) plus ``weight_read_s`` per weight of the model per call (streaming the weights: bytes per weight
/ memory bandwidth), and ``phase_overhead_s`` once per compute phase (a drafting run of K calls, or one
verification): the price of starting work after waiting on the link (cold caches, clock ramp-up on a
shared VM); see ``call_overhead_s``.  All default to 0, so the named presets above are pure eq. 11.  The
measured ``local`` profile (``python -m testbed.simulate calibrate``, fitted by ``wisv.timing.calibrate``) sets
them; ``get_profile("local")`` reads it from ``LOCAL_PROFILE_PATH`` or a given path.  The record's notes also
hold the machine and the time it was measured on; the simulator warns when they no longer fit
(``testbed.sim.staleness``).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

ROLES = ("ue", "edge", "any")
ENDS = ("ue", "edge")  # the two ends of a deployment: a calibration record may hold a fit of each
LOCAL = "local"  # name of the measured profile of this machine
LOCAL_PROFILE_PATH = Path(__file__).resolve().parents[2] / "results" / "local_profile.json"  # calibrate's default
MEASURED_DIR = Path(__file__).resolve().parents[2] / "results" / "profiles"  # NAME.json: measured profiles by name
CALIBRATE_CMD = "python -m testbed.simulate calibrate --out {path}"  # how the local profile file is made


@dataclass(frozen=True)
class HardwareProfile:
    """One compute device as seen by eq. 11."""

    name: str  # registry key, e.g. "a40"
    peak_tflops: float  # dense (no sparsity) FP16/BF16 tensor-core peak, TFLOP/s
    eta: float  # utilisation factor in (0, 1]: achieved / peak FLOP/s while decoding
    source: str  # where peak_tflops and eta come from (datasheet, derivation, measurement)
    role: str = "any"  # "ue" (drafts), "edge" (verifies) or "any"
    mem_bw_gbps: float | None = None  # peak DRAM bandwidth, GB/s (documents the eta bound); None if unknown
    pass_overhead_s: float = 0.0  # fixed time per forward call (dispatch, launches), s; 0 = pure eq. 11
    weight_read_s: float = 0.0  # time per model weight per forward call (weight streaming), s; 0 = pure eq. 11
    phase_overhead_s: float = 0.0  # fixed time per compute phase (drafting run or verification), s; 0 = pure eq. 11
    multirow_overhead_s: float = 0.0  # fixed time per forward call over more than one new position (a verification
    #   or a prefill: the causal-mask path) beyond a 1-row call's, s; 0 = pure eq. 11
    verify_scale: tuple[tuple[int, float], ...] = ()  # (K, measured over modelled time) of a verification pass of K
    #   drafted tokens, as a calibration measured it (``verify_scale``); between two K interpolated in log K, past
    #   either end the nearest; empty: 1 for every K (the model alone)

    def __post_init__(self) -> None:
        if not self.peak_tflops > 0:
            raise ValueError(f"HardwareProfile.peak_tflops must be > 0, got {self.peak_tflops}")
        if not 0 < self.eta <= 1:
            raise ValueError(f"HardwareProfile.eta must be in (0, 1], got {self.eta}")
        if self.role not in ROLES:
            raise ValueError(f"HardwareProfile.role must be one of {ROLES}, got {self.role!r}")
        if self.mem_bw_gbps is not None and not self.mem_bw_gbps > 0:
            raise ValueError(f"HardwareProfile.mem_bw_gbps must be > 0 or None, got {self.mem_bw_gbps}")
        for name in ("pass_overhead_s", "weight_read_s", "phase_overhead_s", "multirow_overhead_s"):
            if not 0 <= getattr(self, name) < float("inf"):
                raise ValueError(f"HardwareProfile.{name} must be finite and >= 0, got {getattr(self, name)}")
        ks = [k for k, _ in self.verify_scale]
        if ks != sorted(set(ks)) or any(k < 1 for k in ks) or not all(0 < f < math.inf for _, f in self.verify_scale):
            raise ValueError(f"HardwareProfile.verify_scale must be (K >= 1, factor > 0) pairs by increasing K, got "
                             f"{self.verify_scale}")

    def verify_factor(self, k: int) -> float:
        """The measured over modelled time of a verification pass of ``k`` drafted tokens (1 without a scale)."""
        if not self.verify_scale:
            return 1.0
        ks, fs = zip(*self.verify_scale)
        return float(np.interp(math.log2(max(k, 1)), np.log2(ks), fs))

    @property
    def effective_flops(self) -> float:
        """eta * F_peak, FLOP/s."""
        return self.eta * self.peak_tflops * 1e12

    def call_overhead_s(self, n_weights: float, passes: float = 1, multirow: float = 0) -> float:
        """Fixed cost of one compute phase of ``passes`` forward calls of an ``n_weights``-weight model, ``multirow``
        of them over more than one new position, s (on top of eq. 11): one phase overhead plus the per-call costs; 0
        for no calls."""
        if passes <= 0:
            return 0.0
        return (self.phase_overhead_s + passes * (self.pass_overhead_s + self.weight_read_s * n_weights)
                + multirow * self.multirow_overhead_s)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> HardwareProfile:
        """Inverse of to_dict; missing required or unknown keys raise ValueError naming them."""
        names = {f.name for f in fields(cls)}
        required = {"name", "peak_tflops", "eta", "source"}
        missing, unknown = sorted(required - set(d)), sorted(set(d) - names)
        if missing or unknown:
            raise ValueError(f"HardwareProfile dict: missing keys {missing}, unknown keys {unknown}")
        try:
            scale = tuple((int(k), float(f)) for k, f in d.get("verify_scale", ()))
        except (TypeError, ValueError):
            raise ValueError(f"HardwareProfile dict: verify_scale must be [K, factor] pairs, got "
                             f"{d['verify_scale']!r}") from None
        return cls(**{**d, "verify_scale": scale})


def roofline_eta(peak_tflops: float, mem_bw_gbps: float, tokens_per_pass: int, bytes_per_param: float = 2.0) -> float:
    """Memory-roofline bound on eta: (2 FLOPs/param * tokens / bytes_per_param) * bandwidth / peak, capped at 1."""
    flops_per_byte = 2.0 * tokens_per_pass / bytes_per_param
    return min(1.0, flops_per_byte * mem_bw_gbps * 1e9 / (peak_tflops * 1e12))


PROFILES: dict[str, HardwareProfile] = {p.name: p for p in (
    HardwareProfile(
        "jetson-agx-orin", peak_tflops=42.5, eta=0.005, role="ue", mem_bw_gbps=204.8,
        source="Jetson AGX Orin 64GB, MAXN (GPU 1.3 GHz). NVIDIA quotes 275 INT8 sparse TOPS for the module = "
               "170 (GPU) + 105 (2x DLA); GPU dense FP16 tensor = 170 / 2 (sparse) / 2 (INT8 -> FP16) = 42.5 TFLOPS, "
               "matching 16 SMs x 1024 FP16 FMA/clk x 2 x 1.3 GHz = 42.6. Derived, not a datasheet line; lower "
               "power modes clock lower (scale accordingly). eta = roofline bound at 1 token/pass with 204.8 GB/s "
               "LPDDR5 (0.0048)."),
    HardwareProfile(
        "a40", peak_tflops=149.7, eta=0.037, role="edge", mem_bw_gbps=696.0,
        source="NVIDIA A40 datasheet: 149.7 TFLOPS FP16/BF16 tensor dense (299.4 with sparsity), full rate with "
               "FP32 accumulate; 696 GB/s GDDR6. eta = roofline bound at 8 tokens/pass (0.0372)."),
    HardwareProfile(
        "a100", peak_tflops=312.0, eta=0.052, role="edge", mem_bw_gbps=2039.0,
        source="NVIDIA A100 datasheet: 312 TFLOPS FP16/BF16 tensor dense (624 with sparsity); 2039 GB/s for the "
               "80GB SXM (1555 for the 40GB PCIe). eta = roofline bound at 8 tokens/pass (0.0523)."),
    HardwareProfile(
        "rtx4090", peak_tflops=165.2, eta=0.006, role="any", mem_bw_gbps=1008.0,
        source="NVIDIA Ada whitepaper, RTX 4090: 165.2 TFLOPS FP16/BF16 tensor dense with FP32 accumulate (what "
               "PyTorch uses; 330.3 with FP16 accumulate); 1008 GB/s GDDR6X. eta = roofline bound at 1 token/pass "
               "(0.0061), i.e. tuned for drafting; use with_roofline_eta() when it verifies."),
    HardwareProfile(
        "h100", peak_tflops=989.4, eta=0.027, role="edge", mem_bw_gbps=3350.0,
        source="NVIDIA H100 SXM5 80GB datasheet: 989.4 TFLOPS BF16 tensor dense (1979 with sparsity); 3.35 TB/s "
               "HBM3 (the PCIe card: 756 TFLOPS, 2.0 TB/s). eta = roofline bound at 8 tokens/pass (0.0271). The "
               "measured profile of `python -m scripts.gpucheck.run` is `h100-measured` (MEASURED_DIR)."),
    HardwareProfile(
        "h200", peak_tflops=989.4, eta=0.039, role="edge", mem_bw_gbps=4800.0,
        source="NVIDIA H200 SXM 141GB datasheet: 989.4 TFLOPS BF16 tensor dense (1979 with sparsity); 4.8 TB/s "
               "HBM3e. eta = roofline bound at 8 tokens/pass (0.0388)."),
)}


def get_profile(name: str, local_path: str | Path | None = None, measured_dir: Path = MEASURED_DIR,
                end: str | None = None) -> HardwareProfile:
    """Named profile from ``PROFILES``, ``"local"`` (the measured profile file, default ``LOCAL_PROFILE_PATH``; with
    ``end`` ("ue" or "edge") that end's own fit where the record has one), or a measured device profile
    ``measured_dir/NAME.json`` (e.g. ``h100-measured``, written by scripts.gpucheck.run)."""
    if name == LOCAL:
        path = Path(local_path) if local_path is not None else LOCAL_PROFILE_PATH
        if not path.is_file():
            raise ValueError(f"no measured 'local' hardware profile at {path}; run "
                             f"`{CALIBRATE_CMD.format(path=path)}` on this machine first")
        return load_profile(path, end)
    if name in PROFILES:
        return PROFILES[name]
    if name.replace("-", "").replace("_", "").isalnum() and (measured_dir / f"{name}.json").is_file():
        return load_profile(measured_dir / f"{name}.json")
    raise ValueError(f"unknown hardware profile {name!r}; known: {known_profiles(measured_dir)}")


def known_profiles(measured_dir: Path = MEASURED_DIR) -> list[str]:
    """Every name ``get_profile`` resolves: the presets, ``local`` and the measured profiles on disk."""
    return sorted(PROFILES) + [LOCAL] + sorted(p.stem for p in measured_dir.glob("*.json"))


def with_roofline_eta(profile: HardwareProfile, tokens_per_pass: int) -> HardwareProfile:
    """Copy of ``profile`` whose eta is the roofline bound for ``tokens_per_pass`` (needs mem_bw_gbps)."""
    if profile.mem_bw_gbps is None:
        raise ValueError(f"profile {profile.name!r} has no mem_bw_gbps; cannot derive a roofline eta")
    eta = roofline_eta(profile.peak_tflops, profile.mem_bw_gbps, tokens_per_pass)
    source = f"{profile.source} [eta re-derived: roofline bound at {tokens_per_pass} tokens/pass]"
    return HardwareProfile(**{**profile.to_dict(), "eta": eta, "source": source})


def verify_scale(by_k: list[dict]) -> tuple[tuple[int, float], ...]:
    """(K, measured over the edge fit's median time) of a calibration's verification passes (its notes' ``by_k``
    rows of role ``verify`` with ``end_fit_ms``) (pure; empty without them; a ValueError on a malformed row).  One fit
    of a fixed and a per-FLOP cost cannot follow a CPU whose pass time steps with the rows; the measured medians, from
    the calibration pool, can (docs/simulator.md)."""
    try:
        rows = [(int(r["k"]), float(r["measured_ms"]), float(r.get("end_fit_ms", 0))) for r in by_k
                if r.get("role") == "verify"]
    except (AttributeError, KeyError, TypeError, ValueError):
        raise ValueError(f"notes.by_k: each row must be an object with role, k and measured_ms, got {by_k!r:.200}"
                         ) from None
    return tuple(sorted((k, ms / fit) for k, ms, fit in rows if fit > 0 and ms > 0))


def save_profile(profile: HardwareProfile, path: str | Path) -> None:
    """Write ``profile`` as JSON."""
    Path(path).write_text(json.dumps(profile.to_dict(), indent=2) + "\n")


def load_profile(path: str | Path, end: str | None = None) -> HardwareProfile:
    """Read a profile written by ``save_profile``, or the ``"profile"`` of a calibration record (validated on load);
    with ``end`` ("ue" or "edge"), a record's fit of that end where it has one (``"ends"``)."""
    try:
        d = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(d, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(d).__name__}")
    if end is not None and end not in ENDS:
        raise ValueError(f"end must be one of {ENDS}, got {end!r}")
    if isinstance(d.get("ends"), dict) and isinstance(d["ends"].get(end), dict):  # a calibration record's own fit
        notes = d.get("notes")
        by_k = (notes.get("by_k") if isinstance(notes, dict) else None) or []
        d = d["ends"][end]
        if end == "edge" and not d.get("verify_scale"):  # the record's measured passes against its edge fit
            d = {**d, "verify_scale": verify_scale(by_k)}
    elif isinstance(d.get("profile"), dict):  # a calibration record (wisv.timing.calibrate.save_calibration)
        d = d["profile"]
    return HardwareProfile.from_dict(d)
