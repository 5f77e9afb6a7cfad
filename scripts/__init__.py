"""The project's own tools, one folder a job; none of it is imported by the rooms (wisv, channel, protocols, testbed,
labeling), and every module here runs as ``python -m scripts.FOLDER.MODULE``.

- ``bench/``: timed benchmarks and measurements; each writes a JSON (and its config) under ``runs/`` by
  default; a result a doc cites is copied to ``results/``, whose README says which command made it.
  A user or a contributor runs them to check a claim on their own machine.
- ``train/``: the recipes that build shipped assets (the toy pair, the SmolLM2 drafter and feature head and the
  Magpie prompts they learn from, WISP's predictors) and the studies of those recipes (learning curve, AAL ceiling).
  The project runs them (``make``).
- ``data/``: dataset and prompt makers (the task pools under ``wisv/assets/``): seeded, offline, the same files each
  time.
- ``cards/``: the model cards written from the benchmarks' JSONs.
- ``link/``: netem/tc link shaping (``netem``), trace makers and the capture-to-replay checks; ``link/traces/`` holds
  the shipped CSI and Mahimahi traces.
- ``gpucheck/``: the prepared GPU check (``python -m scripts.gpucheck.run``, docs/gpu-check.md).
- ``house/``: checks of the house itself (the import graph).
"""
