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
# Test processes (pytest-xdist): most tests run one thread, so two use both cores of a 2-core machine.
PYTEST_WORKERS ?= 2

.PHONY: setup demo scratch-study test test-unit test-stage test-system test-fast bench lint typecheck clean

setup: $(VENV)/.installed

# torch==2.13.0 goes in first: it lies on local disk as a CPU wheel, and a range that admits newer
# releases would otherwise pull a multi-GB CUDA build. It comes from pip's configured indexes; from PyPI
# alone that is the CUDA build (it runs on a CPU, after a download of several GB): TORCH_INDEX_URL names
# another index for torch alone, such as PyTorch's CPU wheels (the Dockerfile's default).
# constraints.txt pins the rest of the stack to the versions the suite passed with.
# pip warns "Location 'file:///.../simple/<project>/' is ignored" for each project that a local file: index
# in the machine's pip configuration (extra-index-url) does not hold: hundreds of lines on such a machine.
# setuptools also prints a 10-line box on every editable install ("Editable installation ... folders with the
# same name as your package"; the package lives under src/, so nothing shadows it).
# PIP_QUIET drops those lines only; pip's other warnings, its errors and (pipefail) its exit status pass.
# Each step prints one line of its own (the commands themselves are not echoed).
PIP_QUIET = 2>&1 | { grep -v "^WARNING: Location '.*' is ignored: " || true; } \
	| sed '/BuildBackendWarning: Editable installation/,/with strategy, WheelFile(/d'
# pip byte-compiles what it installs in one process, most of setup's time on 2 cores; compileall spreads
# it over every core (bench/README.md, "Setup"). Files that are not Python 3 (some packages ship Python 2
# scripts) are skipped, as pip skips them; the variable keeps the quotes out of make's way.
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

# The science NER task and the two corpus arms (continued and its equal-token control), against both references
# (the warmed base and the checkpoint before it) and the floor. The TAPT arm is left out (`domainbert run science`
# trains it): its fine-tuning runs did not fit the 20 minutes meant for a 2-core CPU without bf16, a target
# such a CPU still misses (the README's table gives the times; bench/README.md, "demo_time.py").
# Five seeds: compared in pairs, an arm's difference from the reference has 4 degrees of freedom; with three (2)
# no arm could detect less than 5 points at the page's Holm level (bench/README.md, "Paired comparisons").
demo: setup
	$(BIN)/domainbert run science --workers 2 "finetune.only_tasks=[science-terms-ner]" "pretrain.arms=[continued,control]" "finetune.seeds=[1,2,3,4,5]"

# The from-scratch arm at a budget it can learn from (BERT-mini on the domain vocabulary, 18.4 M tokens, an hour)
# against continued (786,432 tokens from the warmed base), both science tasks, five seeds (domains/science.yaml,
# profile scratch-study; bench/README.md says what it measured and how long it took). A study, not the demo;
# its own run folder.
scratch-study: setup
	$(BIN)/domainbert run science --profile scratch-study --workers 2 --out runs/science-scratch-study

# --durations: the slowest tests, printed at the end, so that a suite growing past its time says where
test: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --durations=25 $(PYTEST_ARGS)

# The lanes, one folder each: unit (pure functions), stage (stages on tiny models), system (servers, signals,
# DeepSpeed, two nodes, documented commands, calibration). test-fast is the everyday one: unit and stage.
test-unit: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) tests/unit $(PYTEST_ARGS)

test-stage: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) tests/stage $(PYTEST_ARGS)

test-system: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --durations=25 tests/system $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) tests/unit tests/stage $(PYTEST_ARGS)

bench: setup
	$(BIN)/python bench/corpus_build.py
	$(BIN)/python bench/vocab.py
	$(BIN)/python bench/pretrain.py
	$(BIN)/python bench/finetune.py

lint: typecheck
	$(BIN)/lint-imports
	$(BIN)/ruff check src flows tests bench
	$(BIN)/ruff format --check src/domainbert flows

# mypy on the package and the flows (configured in pyproject.toml); CI runs it before the tests.
typecheck: setup
	$(BIN)/python -m mypy src/domainbert

clean:
	rm -rf runs .pytest_cache
