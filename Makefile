# bwtune: the two set-up commands are `make demo` and `make test`.
# Both build .venv from nothing on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint typecheck ansible-lint sanity pytest clean

venv: $(STAMP)

$(STAMP): pyproject.toml hatch_build.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: $(STAMP)
	$(BIN)/bwtune demo

test: lint typecheck ansible-lint sanity pytest

lint: $(STAMP)
	$(BIN)/ruff check src plugins tests benchmarks scripts
	$(BIN)/ruff format --check src plugins tests benchmarks scripts

typecheck: $(STAMP)
	$(BIN)/mypy src plugins/module_utils

ansible-lint: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/ansible-lint --profile production

sanity: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH scripts/ansible-test-sanity.sh

# pytest exits 5 when it collects nothing; that is a failure here too (CI must run tests).
pytest: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/pytest -q; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; fi; exit $$rc

clean:
	rm -rf build dist .ansible .mypy_cache .ruff_cache .pytest_cache
