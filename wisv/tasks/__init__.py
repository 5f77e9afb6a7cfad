"""Tasks and prompts: the toy arithmetic task, the QA task and its checker, the long-form task's pools, prompt files,
accuracy and the greedy reference.

Holds ``toydata`` (the toy task), ``qa`` (QA rows and the answer checker; ``numwords`` reads numbers in words),
``pools`` (the long-form task's disjoint distill/calib/test pools), ``suite`` (the broad task suite's pools and its
one table of seen, dev and unseen kinds; ``suite_kinds``, ``suite_free``, ``suite_facts`` and ``suite_words`` hold
its kinds and fact tables), ``prompts`` (a pair's prompt sets), ``datasets`` (the field's sets by name: Spec-Bench,
MT-Bench, GSM8K, vLLM's custom format), ``scoring`` (GSM8K's and translation's scores), ``jsonl`` (prompt files) and
``evaluate`` (accuracy, EOS, target-only reference).  May import: nothing of the project but its own modules (a
bottom room of ``wisv``).
"""
