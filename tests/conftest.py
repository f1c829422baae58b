"""Test tiers that follow from where a test lives or what it drives (docs/testing.md).

- everything under tests/integration is `integration` (real ansible-playbook, the CLI end
  to end), so a new file there needs no marker to stay out of the fast loop;
- a test module that drives headless Chromium (it imports tests/unit/report/headless.py)
  is `browser`.
Other tiers (`oracle`, `hosts`, `slow`) are marked by hand where the test is written.

Every test gets its own empty bwtune home and results database, so what a developer's
~/.local/share/bwtune holds (`bwtune plan` prices launches from it) cannot change a result.
"""

from __future__ import annotations

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(INTEGRATION):
            item.add_marker(pytest.mark.integration)
        if _drives_chromium(getattr(item, "module", None)):
            item.add_marker(pytest.mark.browser)
