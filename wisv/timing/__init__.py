"""The time model: what a round costs in draft, link, verify and head time (SPEC section 4, the simulator's core).

Holds ``latency`` (link time per protocol, payload bits), ``compute`` (FLOPs of drafter, target and head),
``hardware`` (device profiles), ``roundtime`` (a whole round from CSI, hardware and model dimensions) and
``calibrate`` (fitting a profile to measured times).  Pure functions, no torch.  May import: ``channel`` (CSI,
outages) and its own modules.
"""
