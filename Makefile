# bwtune: the two set-up commands are `make demo` and `make test`.
# Both build .venv from nothing on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The demo needs bwtune's runtime dependencies only, not the dev tools (molecule,
# ansible-lint, mypy, ...): its own stamp. `make test` and every tier install dev ($(STAMP)).
RUNTIME_STAMP := $(VENV)/.installed-runtime

.PHONY: venv demo test lint typecheck ansible-lint sanity changelog-lint pytest pytest-shared pytest-quiet packaging molecule \
	test-fast test-integration test-oracle test-browser test-hosts clean

venv: $(STAMP)

$(STAMP): pyproject.toml hatch_build.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

$(RUNTIME_STAMP): pyproject.toml hatch_build.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

demo: $(RUNTIME_STAMP)
	$(BIN)/bwtune demo

# Everything, as CI runs it. The tiers below check part of it (docs/testing.md).
# The checks run TEST_JOBS at a time, the longest first (pytest waits on Ansible, SSH and
# simulated start-ups, molecule on booting hosts): each one's output comes out whole when
# it ends, and every check runs even after one fails, so a run shows all that failed.
# Then the tests marked `quiet` (they hold a measured time to a tolerance) run alone.
TEST_JOBS ?= 3
CHECKS := pytest-shared molecule sanity packaging typecheck ansible-lint lint changelog-lint
test: $(STAMP)
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target --keep-going $(CHECKS); rc=$$?; \
	  $(MAKE) --no-print-directory pytest-quiet || rc=1; exit $$rc

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
# The suite runs on PYTEST_WORKERS processes (pytest-xdist), a whole test file to one worker
# at a time, so a file's module fixtures (booted hosts, a built venv) are made once. Much of
# the suite waits (on ansible, SSH, simulated start-ups), so there are more workers than
# cores. PYTEST_WORKERS=0 runs it in one process (docs/testing.md).
# The fast loop is all CPU: a worker per core.
PYTEST_WORKERS ?= 4
PYTEST_FAST_WORKERS ?= auto
PYTEST_SERIAL = PATH=$(abspath $(BIN)):$$PATH $(BIN)/pytest -q
PYTEST = $(PYTEST_SERIAL) -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
define run_pytest
	$(PYTEST) $(1); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; fi; exit $$rc
endef

pytest: $(STAMP)
	@$(MAKE) --no-print-directory pytest-shared; rc=$$?; $(MAKE) --no-print-directory pytest-quiet || rc=1; exit $$rc

# Every test but the quiet ones, on the workers; first what the test files share is built,
# side by side and outside any test's timeout (tests/build_prereqs.py: the oracle venvs and
# release copies, the bench_serving venv, the test hosts' root filesystems).
pytest-shared: $(STAMP)
	@$(BIN)/python tests/build_prereqs.py; pre=$$?; \
	  $(PYTEST) -m "not quiet"; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; fi; \
	  [ $$rc -ne 0 ] && exit $$rc; exit $$pre

# The quiet ones, one process, nothing else of make test running.
pytest-quiet: $(STAMP)
	$(call run_pytest,-n 0 -m quiet)

# The fast loop: no test of any other tier; under a minute on 2 cores.
test-fast: $(STAMP)
	$(call run_pytest,-n $(PYTEST_FAST_WORKERS) -m "not (integration or oracle or browser or hosts or slow)")

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
