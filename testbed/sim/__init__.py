"""The trace-driven simulator (python -m testbed.simulate): traces, the round-time model over them, calibration,
validation."""
