"""The failure classifier on real SGLang logs from public issue threads.

The floors are the figures measured when the classifier was written (docs/benchmarks.md,
"Failure classification"): every dev log, and 6 of the 7 holdout logs, which were gathered
and labelled after the rules were written (the seventh, SGLang's newer "leave no GPU memory
for the KV cache" wording, was missed and then added).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils.failure_classifier import classify

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "failure_logs"
FLOORS = {"dev": 41, "holdout": 6}


def corpus() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = yaml.safe_load((CORPUS / "manifest.yml").read_text())
    return entries


def classified(entry: dict[str, Any]) -> str:
    lines = (CORPUS / entry["file"]).read_text(encoding="utf-8").splitlines()
    rc = entry.get("returncode", 1) if entry["exited"] else None
    return classify(lines, exited=entry["exited"], returncode=rc).failure_class


def test_corpus_is_real_logs_with_their_threads():
    entries = corpus()
    assert len(entries) >= 40
    files = sorted(p.name for p in CORPUS.glob("*.log"))
    assert files == sorted(e["file"] for e in entries)  # every log listed once, none missing
    assert len({e["url"] for e in entries}) == len(entries)  # one log per thread
    for e in entries:
        assert e["url"].startswith("https://github.com/"), e
        assert e["label"] in results_contract.STARTUP_FAILURES, e
        assert e["split"] in FLOORS and e["why"].strip(), e
        assert (CORPUS / e["file"]).read_text(encoding="utf-8").strip(), e


@pytest.mark.parametrize("split", sorted(FLOORS))
def test_classifier_keeps_its_measured_accuracy(split):
    entries = [e for e in corpus() if e["split"] == split]
    misses = [f"{e['file']}: {e['label']} -> {classified(e)}" for e in entries if classified(e) != e["label"]]
    assert len(entries) - len(misses) >= FLOORS[split], misses


@pytest.mark.parametrize(
    ("file", "label"),
    [
        # The cases: an NCCL error inside model_runner.py and a KeyError in weight
        # loading, with no "weights loading" line in the tail, used to be invalid-args.
        ("02-nccl-error-model-runner-init-torch-distributed.log", "crashed"),
        ("07-keyerror-lm-head-weight-load-weights.log", "crashed"),
        # SGLang's capture advice names --mem-fraction-static: no OOM without an OOM.
        ("12-sm120-capture-graph-rmsnorm-no-kernel-image.log", "unsupported-hardware"),
        ("19-capture-graph-gloo-connection-closed.log", "crashed"),
        # "SM120" in an import failure is no hardware refusal.
        ("18-sgl-kernel-common-ops-missing-libnvrtc-sm120.log", "crashed"),
    ],
)
def test_cases_that_need_the_traceback_not_keywords(file, label):
    [entry] = [e for e in corpus() if e["file"] == file]
    assert entry["label"] == label and classified(entry) == label
