"""The speculative-decoding core: acceptance rules, the in-process SD loop, KV-cached sessions, trees.

Holds ``acceptance`` (greedy, speculative sampling, WISV acceptance), ``speculative`` (the in-process loop and its
records), ``sessions`` (the drafter's and verifier's KV-cached state, shared by the live edge and UE), ``kvcache``,
``lossless`` (the reference check), ``tree``/``treedraft``/``treespec``/``treecal`` (SpecEdge tree drafting),
``specedge`` (proactive drafting, pipeline-aware depth) and ``rejection`` (WISP's rejection predictor on the UE).
May import: ``wisv.tasks``, ``wisv.records``, ``channel`` and its own modules.
"""
