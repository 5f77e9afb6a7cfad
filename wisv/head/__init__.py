"""The WISV decision head: a CSI-aware MLP that scores greedy mismatches, its policy and its saved form (``model``).

May import: ``wisv.timing`` (the head's FLOPs), ``channel`` (CSI features) and its own modules.
"""
