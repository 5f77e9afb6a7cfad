"""The time model: what a round costs in draft, link, verify and head time (SPEC section 4, the simulator's core).

Holds ``latency`` (link time per protocol, payload bits), ``compute`` (FLOPs of drafter, target and head),
``hardware`` (device profiles), ``roundtime`` (a whole round from CSI, hardware and model dimensions),
``calibrate`` (fitting a profile to measured times) and ``window`` (the draft window K that minimises the predicted
time per committed token, ``--draft-len auto``).  Pure functions, no torch.  May import: ``channel`` (CSI,
outages) and its own modules.
"""
