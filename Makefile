# dra-scheduler developer entry points. Everything runs from the project's own virtualenv.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint unit bench run clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check scheduler plugins tests bench
	$(BIN)/mypy

unit: install
	$(BIN)/pytest tests

# The README's test command: lint (ruff + mypy strict) and every test.
test: lint unit

bench: install
	$(BIN)/python bench/bench_simulate.py

# The main job: simulate the example workloads on the demo fleet and print the placement table.
run: install
	$(BIN)/dra-scheduler simulate manifests/examples/ -o table

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
