"""The load generator (python -m testbed.load): many emulated UEs against one batching edge, and sweep comparisons."""
