"""The latency model of a model generating alone (no speculation), read from the protocol's description.

``generates == "target"`` (server-only, protocols/stream.py): the OPEN exchange (prompt ids up, an OK down, one RTT,
the edge's prefill of prompt[:-1], one fixed exchange overhead), then the GENERATE (its request up, half an RTT),
then the edge's target decodes one token per 1-row pass (the KV cache kept; the passes run back to back, one compute
phase: the profile's phase cost once, its per-call cost each) and sends each chunk when it is full, which costs the
edge ``Deployment.chunk_overhead_s`` of host time before its next pass (calibrated: the gap between two chunks' arrivals
beyond the later one's passes);
the downlink serializes chunks in order (a chunk waits while the previous one is still on the wire) and the UE sees
the last chunk half an RTT after its serialization ends.  Once a stream, ``Deployment.stream_start_overhead_s``
(calibrated: the first chunk's arrival beyond this model of it) adds what the warm passes leave out: the edge's
prefill and first decode pass run after it idled through a round trip, on a colder core.
``generates == "drafter"`` (on-device): the UE's drafter prefills prompt[:-1] and decodes one token per 1-row pass;
nothing goes over the link, and each chunk costs the UE ``Deployment.ue_chunk_overhead_s`` of host time (its chunk
loop and record; calibrated as the edge's).  Speculative descriptions are priced per round by wisv.timing.roundtime
instead.

    alone_s(describe("server"), prompt_len, n_tokens, csi_at, dep)            # seconds, OPEN to the last chunk
"""
from __future__ import annotations

from collections.abc import Callable

from channel.csi import CSI
from wisv.timing.compute import ModelDims, compute_s, verify_flops
from wisv.timing.hardware import HardwareProfile
from wisv.timing.latency import down_s, t_single_exchange, up_s
from wisv.timing.protodesc import ProtocolDesc, downlink_bits, uplink_bits
from wisv.timing.roundtime import Deployment, n_weights, t_prefill_s


def decode_steps_s(dims: ModelDims, L: int, n: int, profile: HardwareProfile, dep: Deployment) -> list[float]:
    """The ``n`` 1-row decode passes of a stream from committed length ``L``, s each: one compute phase of ``n`` calls
    (the phase's fixed cost on the first, as drafting's K calls are one phase: the passes run back to back)."""
    w = n_weights(dims, dep.consts)
    per_call = profile.call_overhead_s(w, 1) - profile.phase_overhead_s
    return [compute_s(verify_flops(dims, L + j, 1, dep.consts), profile) + per_call
            + (profile.phase_overhead_s if j == 0 else 0.0) for j in range(n)]


def open_exchange_s(prompt_len: int, csi: CSI, dep: Deployment) -> float:
    """The OPEN exchange: prompt ids up, an OK down, one RTT, the target's prefill of prompt[:-1], one overhead."""
    pb = dep.payload
    return (t_single_exchange(prompt_len * pb.b_tok + pb.o_up, pb.o_dn, csi) + dep.exchange_overhead_s
            + t_prefill_s(dep.target, prompt_len - 1, dep.edge, dep.consts))


def stream_s(d: ProtocolDesc, prompt_len: int, n_tokens: int, csi_at: Callable[[float], CSI], dep: Deployment,
             chunk_tokens: int = 1) -> float:
    """Server-only: OPEN to the UE's receipt of the last chunk of ``n_tokens`` tokens in chunks of ``chunk_tokens``,
    the CSI looked up at each event's time (s from the OPEN)."""
    t = open_exchange_s(prompt_len, csi_at(0.0), dep)
    c = csi_at(t)
    t += up_s(uplink_bits(d, 0, dep.payload), c) + c.rtt_ms / 2e3  # the GENERATE reaches the edge
    t += dep.stream_start_overhead_s  # once a stream: its start on an idled core, beyond the warm passes
    wire_free, done, arrive = t, 0, t
    steps = decode_steps_s(dep.target, prompt_len - 1, n_tokens, dep.edge, dep)  # the first reads the prompt's last
    while done < n_tokens:
        k = min(chunk_tokens, n_tokens - done)
        t += sum(steps[done:done + k]) + dep.chunk_overhead_s
        done += k
        c = csi_at(t)
        wire_free = max(t, wire_free) + down_s(downlink_bits(d, k, dep.payload), c)
        arrive = wire_free + c.rtt_ms / 2e3
    return arrive


def device_s(prompt_len: int, n_tokens: int, dep: Deployment, chunk_tokens: int = 1) -> float:
    """On-device: the drafter's prefill of prompt[:-1], one decode pass per token on the UE, and the UE's host time
    per chunk of ``chunk_tokens``."""
    t = t_prefill_s(dep.drafter, prompt_len - 1, dep.ue, dep.consts)
    chunks = -(-n_tokens // max(1, chunk_tokens))
    steps = decode_steps_s(dep.drafter, prompt_len - 1, n_tokens, dep.ue, dep)
    return t + sum(steps) + chunks * dep.ue_chunk_overhead_s


def alone_s(d: ProtocolDesc, prompt_len: int, n_tokens: int, csi_at: Callable[[float], CSI], dep: Deployment,
            chunk_tokens: int = 1) -> float:
    """A prompt of a protocol that generates alone, by its description: server-only's stream or on-device."""
    if d.speculative:
        raise ValueError(f"protocol {d.name!r} drafts: its rounds are priced by wisv.timing.roundtime")
    if d.edge_rounds:
        return stream_s(d, prompt_len, n_tokens, csi_at, dep, chunk_tokens)
    return device_s(prompt_len, n_tokens, dep, chunk_tokens)

