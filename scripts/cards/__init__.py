"""Model cards: MODEL_CARD.md and card.json beside a pair's weights, written from the benchmarks' JSONs (the toy
pair's from its own measurement, the SmolLM2 pair's from scripts/bench/smollm2_drafter.py)."""
