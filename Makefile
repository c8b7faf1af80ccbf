# The two commands of the README: `make run` and `make test`. Everything else is what they need.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test test-all install lint bench

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Lorekeeper needs Python 3.11"'
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/python manage.py serve

test: install
	$(BIN)/python -m pytest -m "not slow"

test-all: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: install
	$(BIN)/python bench/import_export.py
	$(BIN)/python bench/sync.py
