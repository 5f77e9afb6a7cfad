"""The edge's serving pieces (WISP): verification engines, batched verification, the SLO scheduler, the verify-time
estimator, KV budget.

Holds ``engine`` (the edge's verification interface and the engine names), ``batchverify`` (our engine: one batched
target pass over many sessions' blocks), ``vllm_engine`` (the vLLM engine), ``scheduler`` (SLO-aware batch choice,
Algorithm 1), ``estimator`` (verification time from batch shape), ``kvbudget`` (KV memory per session) and ``wdt``
(the edge's WDT predictor: each pending block's g_i and wasted tokens).
May import: ``wisv.decoding`` (sessions, KV cache) and the rooms below it.
"""
