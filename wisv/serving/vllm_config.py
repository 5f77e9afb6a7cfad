"""The vLLM engine's settings (``--engine vllm``) apart from the engine: the edge's config reads them without torch."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class VllmConfig:
    """vLLM engine settings (``--engine vllm``), passed to ``vllm.LLM``; dtype and KV memory come from the edge's
    --dtype and --memory-budget-mb."""

    tensor_parallel_size: int = 1  # vllm: GPUs each layer of the target is split across (tensor parallel)
    pipeline_parallel_size: int = 1  # vllm: pipeline stages (GPUs or nodes) the target's layers are cut into
    block_size_tokens: int | None = None  # vllm: KV-cache block size, tokens (none: vLLM's; CPU: a multiple of 32)
    gpu_memory_utilization: float | None = field(  # vllm on CUDA: GPU memory share to take, KV cache from the rest
        default=None)  # (none: --memory-budget-mb)
    max_model_len_tokens: int | None = None  # vllm: longest sequence served, tokens (none: the target's context)
    enforce_eager: bool = True  # vllm: no CUDA graphs nor compilation (starts in seconds; off for GPU speed)
    distributed_backend: str | None = None  # vllm: workers over "mp" (one node) or "ray" (several; none: vLLM's)
    engine_process: bool = False  # vllm: its engine core in a process of its own (vLLM's default), not the edge's
