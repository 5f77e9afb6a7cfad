"""Checks of the house itself, run by the tests and by hand: the import graph (no upward import, no cycle)."""
