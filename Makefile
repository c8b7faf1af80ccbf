# The two commands of the README: `make run` and `make test`. Everything else is what they need.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# PyTorch for the local embedding model, always the CPU build: from a wheel the machine already has (pip's
# find-links) when there is one, else from PyTorch's CPU index. Plain PyPI would bring a multi-GB CUDA build.
TORCH_VERSION ?= 2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: run test test-all install lint bench

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Lorekeeper needs Python 3.11"'
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	( $(BIN)/python -m pip install --quiet --no-deps --no-index "torch==$(TORCH_VERSION)" 2>/dev/null \
		&& $(BIN)/python -m pip install --quiet "torch==$(TORCH_VERSION)" ) \
		|| $(BIN)/python -m pip install --quiet "torch==$(TORCH_VERSION)" --extra-index-url $(TORCH_INDEX)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/python manage.py serve

test: install
	$(BIN)/python -m pytest -m "not slow"

# Everything, the slow suites too (every API operation fuzzed from the schema, multi-instance convergence, real-worker
# and database faults; `make test` fuzzes a smoke subset): more inputs per fuzzed operation.
test-all: install
	LOREKEEPER_FUZZ_EXAMPLES=50 LOREKEEPER_FUZZ_EXAMPLES_JSON=300 $(BIN)/python -m pytest

# Style, then the layers of the apps (import-linter's contracts in pyproject.toml; docs/ARCHITECTURE.md).
lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports

bench: install
	$(BIN)/python bench/import_export.py
	$(BIN)/python bench/sync.py
	$(BIN)/python bench/embeddings.py
	$(BIN)/python bench/locomo_recall.py
	$(BIN)/python bench/memory_search.py
	$(BIN)/python bench/lifecycle.py
	$(BIN)/python bench/extraction.py
	$(BIN)/python bench/context.py
	$(BIN)/python bench/sync_instances.py
	$(BIN)/python bench/load.py
	$(BIN)/python bench/sillytavern.py
	$(BIN)/python bench/chat.py
	$(BIN)/python bench/consent.py
	$(BIN)/python bench/pages.py
