"""The edge's verification engine from its settings: the engine by name (wisv/serving/engines.py), or none (a
VerifySession per session), its DRAFT batcher when batching, and the ``--pass-rows`` padding plan."""
from __future__ import annotations

from testbed.live.edge.edgebatch import BatcherConfig, DraftBatcher
from testbed.live.edge.serveconfig import ServeConfig
from wisv.decoding.passrows import load_plan
from wisv.models.loader import resolve_dtype
from wisv.serving.engine import EngineOptions, VerifyEngine
from wisv.serving.engines import build_engine
from wisv.serving.estimator import EstimatorProfile
from wisv.serving.wdt import WDTPredictor


def pad_plan(cfg: ServeConfig, engine: VerifyEngine | None) -> dict[int, int] | None:
    """--pass-rows's plan (None without it); it pads a session's own VerifySession, so no engine may serve."""
    if cfg.pass_rows is None:
        return None
    if engine is not None:
        raise ValueError("--pass-rows pads each session's own pass: not with --batch-verify, --no-kv-reuse or "
                         "--engine vllm")
    return load_plan(cfg.pass_rows)


def build(cfg: ServeConfig, target, hidden_layer: int) -> tuple[VerifyEngine | None, DraftBatcher | None]:
    """The engine (vLLM with --engine vllm; ours with --batch-verify or --no-kv-reuse, else none: a VerifySession per
    session), from the engine registry, and, when batching, its batcher."""
    if cfg.sibling and cfg.engine != "transformers":
        raise ValueError(f"--sibling needs --engine transformers (the {cfg.engine} engine verifies no sibling branch)")
    if cfg.engine == "transformers" and not cfg.batch_verify and cfg.kv_reuse:
        return None, None
    dtype = str(resolve_dtype(cfg.dtype, cfg.device)).removeprefix("torch.")
    engine = build_engine(cfg.engine, target, EngineOptions(
        kv_reuse=cfg.kv_reuse, session_timeout_s=cfg.session_timeout_s, memory_budget_mb=cfg.memory_budget_mb,
        hidden_layer=hidden_layer, dtype=dtype, extra=cfg.vllm))
    if not cfg.batch_verify:
        return engine, None
    est = EstimatorProfile.load(cfg.estimator) if cfg.estimator else None
    wdt = WDTPredictor.load(cfg.wdt_predictor) if cfg.wdt_predictor else None
    batching = BatcherConfig(scheduler=cfg.scheduler, max_batch=cfg.max_batch, guard_s=cfg.guard_ms / 1e3,
                             lost_order=cfg.lost_order, slack_s=None if cfg.slack_ms is None else cfg.slack_ms / 1e3,
                             arrival_reserve=cfg.arrival_reserve)
    return engine, DraftBatcher(engine, batching, estimator=est, wdt=wdt)
