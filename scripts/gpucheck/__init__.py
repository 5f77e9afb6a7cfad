"""The GPU check's parts (``python -m scripts.gpucheck.run``):
plan, models, lossless, timing, testbed, Table I, report."""
