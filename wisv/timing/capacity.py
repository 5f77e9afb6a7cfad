"""Server capacity and cost, speculation against server-only (SpecEdge's comparison), on a roofline (pure).

One edge serves B sessions a pass.  Server-only: each pass is a decode step of B rows and commits B tokens.  Device-edge
speculation: each pass verifies B blocks of K + 1 rows and commits ``B (AAL + 1)`` tokens (AAL: accepted draft tokens
per round, the bonus or correction not counted).  A pass of n rows costs the larger of its FLOPs at the device's peak
(eq. 13's ``f(l)`` per row) and one read of the target's weights (and the rows' KV) at its memory bandwidth, plus the
profile's per-call overhead: while a pass is memory-bound, K + 1 rows cost about what one does, which is why a GPU edge
gains throughput from speculation and a CPU (where a pass of several rows costs 1.5-2x one row: docs/pairs.md) does
not.  Server throughput is committed tokens per second of edge compute.

Cost (SpecEdge's cost efficiency): tokens per dollar, the server's price per hour against the server's plus, for
speculation, each session's edge device (the drafter's GPU) by the hour; the prices are configuration, not facts.
"""
from __future__ import annotations

from dataclasses import dataclass

from wisv.timing.compute import ModelDims, flops_per_token
from wisv.timing.hardware import HardwareProfile

KV_BYTES = 2  # bytes per cached key or value element (bf16)


@dataclass(frozen=True)
class Prices:
    """Hardware prices by the hour (configuration: set them to what you pay)."""

    server_usd_per_hour: float = 1.50  # the edge server's GPU (an A100's on-demand cloud price, order of magnitude)
    device_usd_per_hour: float = 0.10  # one UE's drafter device (a consumer GPU's or a Jetson's amortised price)

    def __post_init__(self) -> None:
        if not (self.server_usd_per_hour > 0 and self.device_usd_per_hour >= 0):
            raise ValueError(f"prices must be > 0 (server) and >= 0 (device), got {self.server_usd_per_hour}, "
                             f"{self.device_usd_per_hour}")


def params(dims: ModelDims) -> float:
    """Weights of the decoder (attention, MLP, embeddings and head): what each pass reads once."""
    attn = dims.d_model * dims.d_model * (2 + 2 * dims.kv_ratio)
    return dims.n_layers * (attn + 3 * dims.d_model * dims.d_ff) + 2 * dims.vocab * dims.d_model


def pass_s(dims: ModelDims, rows: int, context: int, profile: HardwareProfile, batch: int = 1) -> float:
    """One forward pass of ``rows`` rows in all, over ``batch`` sessions of ``context`` cached positions each: the
    larger of compute (FLOPs at peak) and memory (weights once, each session's KV once) plus the per-call overhead."""
    if rows < 1 or batch < 1 or context < 0:
        raise ValueError(f"need rows >= 1, batch >= 1, context >= 0; got {rows}, {batch}, {context}")
    if profile.mem_bw_gbps is None:
        raise ValueError(f"profile {profile.name!r} has no mem_bw_gbps: no roofline")
    flops = rows * flops_per_token(dims, context)
    kv = batch * context * 2 * dims.n_layers * dims.d_model * dims.kv_ratio * KV_BYTES
    mem_bytes = 2 * params(dims) + kv  # bf16 weights
    compute = flops / (profile.peak_tflops * 1e12)
    memory = mem_bytes / (profile.mem_bw_gbps * 1e9)
    return max(compute, memory) + profile.pass_overhead_s


@dataclass(frozen=True)
class Capacity:
    """Server throughput at one batch size: server-only against speculation."""

    batch: int  # sessions a pass
    decode_s: float  # a server-only pass (B rows), s
    verify_s: float  # a speculative pass (B x (K + 1) rows), s
    server_only_tok_s: float  # committed tokens per second of edge compute, server-only
    spec_tok_s: float  # the same, speculation

    @property
    def ratio(self) -> float:
        """Speculation's server throughput over server-only's (SpecEdge's 2.22x)."""
        return self.spec_tok_s / self.server_only_tok_s


def capacity(dims: ModelDims, profile: HardwareProfile, batch: int, k: int, aal: float, context: int) -> Capacity:
    """Server throughput of server-only and of speculation at ``batch`` sessions, K-token blocks and a drafter of
    ``aal`` accepted tokens per round, ``context`` cached positions a session."""
    if k < 1 or aal < 0 or aal > k:
        raise ValueError(f"need k >= 1 and 0 <= aal <= k, got {k}, {aal}")
    dec = pass_s(dims, batch, context, profile, batch)
    ver = pass_s(dims, batch * (k + 1), context, profile, batch)
    return Capacity(batch, dec, ver, batch / dec, batch * (aal + 1) / ver)


def tokens_per_usd(tok_per_s: float, sessions: int, prices: Prices, with_devices: bool) -> float:
    """Committed tokens per dollar at ``tok_per_s``: the server's price, plus ``sessions`` devices' when they draft."""
    usd_per_s = (prices.server_usd_per_hour + (sessions * prices.device_usd_per_hour if with_devices else 0)) / 3600
    return tok_per_s / usd_per_s


def cost_row(c: Capacity, prices: Prices) -> dict:
    """A table row: throughputs, their ratio and tokens per dollar of each (speculation pays for its devices)."""
    so, sp = tokens_per_usd(c.server_only_tok_s, c.batch, prices, False), tokens_per_usd(c.spec_tok_s, c.batch,
                                                                                         prices, True)
    return {"batch": c.batch, "decode_ms": 1e3 * c.decode_s, "verify_ms": 1e3 * c.verify_s,
            "server_only_tok_s": c.server_only_tok_s, "spec_tok_s": c.spec_tok_s, "throughput_ratio": c.ratio,
            "server_only_tok_per_usd": so, "spec_tok_per_usd": sp, "cost_efficiency_ratio": sp / so}
