# domainbert: `make demo` sets up .venv and runs the science pipeline offline; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Offline by default: a hub name would otherwise spend a minute timing out before failing.
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 120
export TOKENIZERS_PARALLELISM ?= false
PYTEST_ARGS ?=
TORCH_INDEX_URL ?=
# Test processes (pytest-xdist): each runs torch on one thread (tests/conftest.py), so two use both cores of a 2-core machine.
PYTEST_WORKERS ?= 2
# An idle test process takes queued tests from the busy one (tests/conftest.py queues the slow tests first).
PYTEST_DIST ?= worksteal

.PHONY: setup demo scratch-study test test-unit test-stage test-system test-fast bench lint typecheck clean

setup: $(VENV)/.installed

# torch==2.13.0 goes in first, pinned, so that no range pulls a newer multi-GB CUDA build; TORCH_INDEX_URL names
# another index for torch alone, and constraints.txt pins the rest (docs/development.md).
# PIP_QUIET drops only pip's "Location ... is ignored" lines and setuptools' editable-install box, repeated for
# every project; pip's other warnings, its errors and (pipefail) its exit status pass.
PIP_QUIET = 2>&1 | { grep -v "^WARNING: Location '.*' is ignored: " || true; } \
	| sed '/BuildBackendWarning: Editable installation/,/with strategy, WheelFile(/d'
# compileall byte-compiles on every core what pip would compile in one process, skipping what pip skips
# (bench/results/setup_cpu-avx2_2026-11.md).
export COMPILE_ENV := import compileall, sysconfig; compileall.compile_dir(sysconfig.get_path("purelib"), quiet=2, workers=0)

$(VENV)/.installed: SHELL := /bin/bash
$(VENV)/.installed: .SHELLFLAGS := -o pipefail -c
$(VENV)/.installed: pyproject.toml constraints.txt
	@echo "setup: a virtual environment in $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@echo "setup: pip"
	@$(BIN)/python -m pip install --quiet --upgrade pip $(PIP_QUIET)
	@echo "setup: torch==2.13.0 from $(or $(TORCH_INDEX_URL),pip's configured indexes)"
	@$(BIN)/python -m pip install --quiet --no-compile torch==2.13.0 \
		$(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)) $(PIP_QUIET)
	@echo "setup: domainbert and its pinned dependencies (constraints.txt)"
	@$(BIN)/python -m pip install --quiet --no-compile -c constraints.txt -e ".[dev]" $(PIP_QUIET)
	@echo "setup: byte-compiling the environment on every core"
	@$(BIN)/python -c "$$COMPILE_ENV"
	@touch $@

# The science NER task and the general-English forgetting task, continued and its equal-token control, five
# seeds: sized for a 2-core CPU, and why each choice is what it is: docs/demo.md.
demo: setup
	$(BIN)/domainbert run science --workers 2 "finetune.forgetting_task.enabled=true" "finetune.only_tasks=[science-terms-ner,general-lexname]" "pretrain.arms=[continued,control]" "finetune.seeds=[1,2,3,4,5]"

# From scratch against continued, each at a budget it can learn from: a study, not the demo, in its own run
# folder (docs/profiles.md, scratch-study).
scratch-study: setup
	$(BIN)/domainbert run science --profile scratch-study --workers 2 --out runs/science-scratch-study

# --durations: the slowest tests, printed at the end, so that a suite growing past its time says where
test: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist $(PYTEST_DIST) --durations=25 $(PYTEST_ARGS)

# The lanes, one folder each: unit (pure functions), stage (stages on tiny models), system (servers, signals,
# DeepSpeed, two nodes, documented commands, calibration). test-fast is the everyday one: unit and stage.
test-unit: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist $(PYTEST_DIST) tests/unit $(PYTEST_ARGS)

test-stage: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist $(PYTEST_DIST) tests/stage $(PYTEST_ARGS)

test-system: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist $(PYTEST_DIST) --durations=25 tests/system $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist $(PYTEST_DIST) tests/unit tests/stage $(PYTEST_ARGS)

bench: setup
	$(BIN)/python bench/corpus_build.py
	$(BIN)/python bench/vocab.py
	$(BIN)/python bench/pretrain.py
	$(BIN)/python bench/finetune.py

lint: typecheck
	$(BIN)/lint-imports
	$(BIN)/ruff check src flows tests bench examples studies
	$(BIN)/ruff format --check src/domainbert flows examples

# mypy on the package and the flows (configured in pyproject.toml); CI runs it before the tests.
typecheck: setup
	$(BIN)/python -m mypy src/domainbert

clean:
	rm -rf runs .pytest_cache
