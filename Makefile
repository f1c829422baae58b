# bwtune: the two set-up commands are `make demo` and `make test`.
# Both build .venv from nothing on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint typecheck ansible-lint sanity changelog-lint pytest packaging molecule \
	test-fast test-integration test-oracle test-browser test-hosts clean

venv: $(STAMP)

$(STAMP): pyproject.toml hatch_build.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: $(STAMP)
	$(BIN)/bwtune demo

# Everything, as CI runs it. The tiers below check part of it (docs/testing.md).
test: lint typecheck ansible-lint sanity changelog-lint pytest packaging molecule

lint: $(STAMP)
	$(BIN)/ruff check src plugins tests benchmarks scripts
	$(BIN)/ruff format --check src plugins tests benchmarks scripts

typecheck: $(STAMP)
	$(BIN)/mypy src plugins/module_utils

ansible-lint: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/ansible-lint --profile production

sanity: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH scripts/ansible-test-sanity.sh

changelog-lint: $(STAMP)
	$(BIN)/antsibull-changelog lint
	$(BIN)/antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
	@# CHANGELOG.md is generated: it must be what changelog.yaml renders to.
	@out=$$(mktemp) && trap 'rm -f $$out' EXIT && \
	  $(BIN)/antsibull-changelog generate --output $$out --output-format md && \
	  diff -u CHANGELOG.md $$out >&2 || { echo "CHANGELOG.md is stale: run $(BIN)/antsibull-changelog generate" >&2; exit 1; }

# pytest exits 5 when it collects nothing; that is a failure here too (CI must run tests).
PYTEST = PATH=$(abspath $(BIN)):$$PATH $(BIN)/pytest -q
define run_pytest
	$(PYTEST) $(1); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; fi; exit $$rc
endef

pytest: $(STAMP)
	$(call run_pytest,)

# The fast loop: no test of any other tier; under a minute on 2 cores.
test-fast: $(STAMP)
	$(call run_pytest,-m "not (integration or oracle or browser or hosts or slow)")

test-integration: $(STAMP)
	$(call run_pytest,-m integration)

test-oracle: $(STAMP)
	$(call run_pytest,-m oracle)

test-browser: $(STAMP)
	$(call run_pytest,-m browser)

test-hosts: $(STAMP)
	$(call run_pytest,-m hosts)

# The wheel and the galaxy tarball, each installed into a fresh environment and used.
packaging: $(STAMP)
	$(call run_pytest,tests/packaging)

molecule: $(STAMP)
	@if [ -f scripts/molecule-all.sh ]; then \
	  PATH=$(abspath $(BIN)):$$PATH bash scripts/molecule-all.sh; \
	else \
	  echo "molecule: scripts/molecule-all.sh does not exist, no scenario to run"; \
	fi

clean:
	rm -rf build dist .ansible .mypy_cache .ruff_cache .pytest_cache changelogs/.plugin-cache.yaml
