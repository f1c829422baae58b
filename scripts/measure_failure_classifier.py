#!/usr/bin/env python3
"""Accuracy and confusion of the failure classifier on the real-log corpus.

    .venv/bin/python scripts/measure_failure_classifier.py [--before COMMIT]

Reads tests/fixtures/failure_logs/manifest.yml, classifies every log with
plugins/module_utils/_sglang/failure_classifier.py and prints accuracy per split (dev, holdout)
and the confusion table. `--before COMMIT` also runs launcher.classify_failure as it was
at COMMIT (e.g. 4a14a1a, the regex-and-load-line classifier) on the same logs.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fixtures" / "failure_logs"

Classifier = Callable[..., Any]


def load_corpus() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = yaml.safe_load((CORPUS / "manifest.yml").read_text())
    for e in entries:
        e["lines"] = (CORPUS / e["file"]).read_text(encoding="utf-8").splitlines()
    return entries


def classifier_at(commit: str) -> Classifier:
    """launcher.classify_failure as it was at `commit` (run from the file's text)."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{commit}:plugins/module_utils/_server/launcher.py"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    module = types.ModuleType(f"launcher_at_{commit}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"launcher.py@{commit}", "exec"), module.__dict__)
    fn: Classifier = module.__dict__["classify_failure"]
    return fn


def measure(name: str, classify: Classifier, entries: list[dict[str, Any]]) -> None:
    per_split: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    confusion: collections.Counter[tuple[str, str]] = collections.Counter()
    for e in entries:
        rc = e.get("returncode", 1) if e["exited"] else None
        got = classify(e["lines"], exited=e["exited"], returncode=rc)[0]
        confusion[(e["label"], got)] += 1
        per_split[e["split"]][0] += got == e["label"]
        per_split[e["split"]][1] += 1
        if got != e["label"]:
            print(f"  {name}: {e['file']}: labelled {e['label']}, classified {got}")
    total = [sum(v[0] for v in per_split.values()), sum(v[1] for v in per_split.values())]
    for split, (ok, n) in [*sorted(per_split.items()), ("all", total)]:
        print(f"{name:>8} {split:>8}: {ok}/{n} = {ok / n:.2f}")
    print(f"{name:>8} confusion (label -> classified):")
    for (label, got), n in sorted(confusion.items()):
        print(f"{'':>10}{label:>22} -> {got:<22}{n}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="COMMIT", help="also measure launcher.py at COMMIT")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import failure_classifier

    entries = load_corpus()
    if args.before:
        measure("before", classifier_at(args.before), entries)
    measure("now", failure_classifier.classify_failure, entries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
