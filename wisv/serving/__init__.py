"""The edge's serving pieces (WISP): batched verification, the SLO scheduler, the verify-time estimator, KV budget.

Holds ``batchverify`` (one batched target pass over many sessions' blocks), ``scheduler`` (SLO-aware batch
choice, Algorithm 1), ``estimator`` (verification time from batch shape) and ``kvbudget`` (KV memory per session).
May import: ``wisv.decoding`` (sessions, KV cache) and the rooms below it.
"""
