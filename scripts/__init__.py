"""Model-pair training, benchmarks and netem/namespace scripts."""
