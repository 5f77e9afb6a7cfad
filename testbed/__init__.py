"""Processes and CLIs that wire wisv, protocols and channel together and write per-round records."""
