"""Chaos harness: seeded fault schedules against a live edge and UEs, and a checker of invariants."""
