# The two commands of the README: `make run` and `make test`. Everything else is what they need.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# PyTorch for the local embedding model, always the CPU build: from a wheel the machine already has (pip's
# find-links) when there is one, else from PyTorch's CPU index. Plain PyPI would bring a multi-GB CUDA build.
TORCH_VERSION ?= 2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: run test test-all install lint bench bench-small

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Lorekeeper needs Python 3.11"'
	$(call step,virtualenv,$(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install --quiet --upgrade pip)

# The first install takes minutes (PyTorch alone is several hundred MB): each step says when it starts and how long
# it took, so that a silent pip is not mistaken for a hung one.
$(STAMP): pyproject.toml | $(BIN)/python
	$(call step,PyTorch $(TORCH_VERSION) (CPU build),( $(TORCH_INSTALL) ))
	$(call step,packages,$(BIN)/python -m pip install --quiet -e '.[dev]')
	touch $(STAMP)
	@echo "== installed; the first \`make run\` then makes the database, migrates and loads the embedding model"

TORCH_INSTALL = ( $(BIN)/python -m pip install --quiet --no-deps --no-index "torch==$(TORCH_VERSION)" 2>/dev/null \
	&& $(BIN)/python -m pip install --quiet "torch==$(TORCH_VERSION)" ) \
	|| $(BIN)/python -m pip install --quiet "torch==$(TORCH_VERSION)" --extra-index-url $(TORCH_INDEX)

install: $(STAMP)

run: install
	$(BIN)/python manage.py serve

# Two test processes (pytest-xdist), each with its own test database: the suite waits on browsers, workers and
# emulated CPUs as much as it computes, so two share two cores in about 60% of one's time. TEST_WORKERS=0 runs it
# in this process alone.
TEST_WORKERS ?= 2

test: install
	$(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS)

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
	$(BIN)/python bench/locomo_speed.py
	$(BIN)/python bench/memory_search.py
	$(BIN)/python bench/lifecycle.py
	$(BIN)/python bench/extraction.py
	$(BIN)/python bench/context.py
	$(BIN)/python bench/sync_instances.py
	$(BIN)/python bench/load.py
	$(BIN)/python bench/sillytavern.py
	$(BIN)/python bench/chat.py
	$(BIN)/python bench/gateway.py
	$(BIN)/python bench/consent.py
	$(BIN)/python bench/pages.py
	$(BIN)/python bench/lorebooks.py

# Every bench of `make bench` at a small size, each followed by its wall time; CI runs it after `make test`, so that
# no bench rots unseen. A bench that crashes or finds a broken result (a lost write, a failed job) fails it; a figure
# missing its goal does not (on a shared machine figures are noise). For bench/locomo_recall.py, LoCoMo's first
# conversation with a third of its questions, in var/.
bench-small: install
	mkdir -p var
	$(BIN)/python -c 'import json, sys; [s] = json.load(open(sys.argv[1]))[:1]; s["qa"] = s["qa"][::3]; \
		json.dump([s], open(sys.argv[2], "w"))' ../shared/benchmarks/locomo/locomo-dev6.json var/locomo-one.json
	$(call timed,bench/import_export.py --sizes 100 300)
	$(call timed,bench/sync.py --quick)
	$(call timed,bench/embeddings.py --count 200)
	$(call timed,bench/locomo_recall.py --quick --data var/locomo-one.json)
	$(call timed,bench/locomo_speed.py --conversations 1 --questions 30)
	$(call timed,bench/memory_search.py --isolation --isolation-size 1000 --isolation-others 2000 20000 --own-index-min 500)
	$(call timed,bench/lifecycle.py --sizes 300 --batch 40 --facts 15)
	$(call timed,bench/extraction.py --passes 3 --rounds 2 --chats 5)
	$(call timed,bench/context.py --small --builds 10)
	$(call timed,bench/sync_instances.py --memories 2000 --changes 200)
	$(call timed,bench/load.py --users 3 --seconds 10 --workers 2)
	$(call timed,bench/sillytavern.py --messages 500 --turns 20)
	$(call timed,bench/chat.py --streams 10 --people 3 --seconds 8 --ramp 2 --long-chat 500 --generations 5 --workers 2)
	$(call timed,bench/gateway.py --messages 500 --requests 10)
	$(call timed,bench/consent.py --messages 200)
	$(call timed,bench/pages.py --runs 1)
	$(call timed,bench/lorebooks.py --small)

# One step of the install: its name, then the command; how long it took after it.
step = @echo "== $(1) ..." && started=$$(date +%s) && $(2) && echo "== $(1): $$(($$(date +%s) - started)) s"

# One bench script with its arguments, then how long it took.
timed = @echo "== $(1)" && started=$$(date +%s) && $(BIN)/python $(1) && echo "== $(1): $$(($$(date +%s) - started)) s"
