"""One sweep per results file: a second one is refused before it can touch the first's server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_failures import SweepFailed
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep.sweep_locks import lock_results


def test_a_second_sweep_on_the_same_results_file_is_refused(tmp_path: Path) -> None:
    results = str(tmp_path / "results.jsonl")
    held = lock_results(results)
    try:
        with pytest.raises(SweepFailed, match="is still running on this node"):
            lock_results(results)
        other = lock_results(str(tmp_path / "other.jsonl"))  # another file: no conflict
        os.close(other)
    finally:
        os.close(held)
    os.close(lock_results(results))  # released with its holder
