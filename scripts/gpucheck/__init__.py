"""The GPU check's parts (``python -m scripts.gpu_check``): plan, models, lossless, timing, testbed, Table I, report."""
