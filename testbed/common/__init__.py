"""Helpers that the live processes, the simulator and the load generator share: link spec, heads, summaries,
machine info."""
