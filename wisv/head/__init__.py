"""Who decides a greedy mismatch: the acceptance-policy interface and the fixed policies (``policy``), the WISV
decision head (``model``: a CSI-aware MLP over [h_d ; h_t ; c]), the judges (``judges``), the edge's free features
(``features``) and one save/load for heads and judges, dispatched on ``kind`` (``store``).

May import: ``wisv.timing`` (the head's FLOPs, the link time of tau(CSI)), ``channel`` (CSI features) and its own
modules.
"""
