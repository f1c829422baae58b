"""Test tiers that follow from where a test lives or what it drives (docs/testing.md).

- everything under tests/integration is `integration` (real ansible-playbook, the CLI end
  to end), so a new file there needs no marker to stay out of the fast loop;
- a test module that drives headless Chromium (it imports tests/unit/report/headless.py)
  is `browser`.
Other tiers (`oracle`, `hosts`, `slow`) are marked by hand where the test is written.

Every test gets its own empty bwtune home and results database, so what a developer's
~/.local/share/bwtune holds (`bwtune plan` prices launches from it) cannot change a result.

`make test` runs pytest on several workers (pytest-xdist, a test file per worker at a
time). Each worker process gets its own stand-in GPU state (what the fake nvidia-smi adds
up), so a stand-in serving in one worker's test never holds "GPU memory" another worker's
sweep waits for; a test that sets its own state directory still does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

INTEGRATION = Path(__file__).parent / "integration"
HEADLESS_HELPER = "headless"  # tests/unit/report/headless.py, imported by its module name


def _drives_chromium(module: ModuleType | None) -> bool:
    if module is None:
        return False
    for value in vars(module).values():
        name = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
        if name == HEADLESS_HELPER:
            return True
    return False


@pytest.fixture(autouse=True)
def _own_bwtune_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("bwtune-home")
    monkeypatch.setenv("BWTUNE_HOME", str(home))
    monkeypatch.setenv("BWTUNE_DB", str(home / "results.db"))


# Set by pytest_configure: which pytest process made BWTUNE_STANDIN_STATE_DIR. xdist workers
# inherit the controller's environment, so a worker replaces a folder another process made.
_STATE_OWNER = "BWTUNE_TEST_STANDIN_STATE_OWNER"
_MADE: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    # One GPU state per pytest process (each xdist worker, or the one serial run), under its
    # own temporary folder, never the machine-wide default (src/bwtune/standin/gpu_state.py).
    me = os.environ.get("PYTEST_XDIST_WORKER", "main") + f"-{os.getpid()}"
    ours = os.environ.get(_STATE_OWNER)
    if "BWTUNE_STANDIN_STATE_DIR" in os.environ and ours is None:
        return  # the developer's own choice
    if ours != me:
        made = tempfile.mkdtemp(prefix="bwtune-standin-state-")
        _MADE.append(made)
        os.environ["BWTUNE_STANDIN_STATE_DIR"] = made
        os.environ[_STATE_OWNER] = me


def pytest_unconfigure(config: pytest.Config) -> None:
    for made in _MADE:
        shutil.rmtree(made, ignore_errors=True)


def _mark_by_place_and_use(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(INTEGRATION):
            item.add_marker(pytest.mark.integration)
        if _drives_chromium(getattr(item, "module", None)):
            item.add_marker(pytest.mark.browser)


# The longest tiers first: with the suite spread over workers a file at a time (make test:
# --dist loadfile --no-loadscope-reorder keeps this order), a long file started last would
# run alone at the end. Within a tier, files with more tests first. Only the order
# changes, never what runs.
_FIRST = ("oracle", "hosts", "integration", "slow")


def _tier_rank(item: pytest.Item) -> int:
    for rank, marker in enumerate(_FIRST):
        if item.get_closest_marker(marker) is not None:
            return rank
    return len(_FIRST)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    # Mark before every other implementation, `-m`'s deselection among them (a marker added
    # after it selects nothing); order after all of them, once every conftest has marked.
    _mark_by_place_and_use(items)
    yield
    per_file = Counter(item.path for item in items)
    rank = {item.path: len(_FIRST) for item in items}
    for item in items:  # a file goes with its longest tier
        rank[item.path] = min(rank[item.path], _tier_rank(item))
    # stable: a file's tests keep their order
    items.sort(key=lambda item: (rank[item.path], -per_file[item.path], str(item.path)))
