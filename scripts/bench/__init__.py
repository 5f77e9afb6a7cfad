"""Timed benchmarks and measurements, for users and contributors: each parses its flags into a config dataclass, runs,
and writes a JSON (with its config and the machine's load) where ``--out`` says; speed and memory targets live here,
not in the tests.  ``python -m scripts.bench.NAME --help`` for any of them."""
