#!/usr/bin/env python3
"""The failure classifier on the real-log corpus: dev and held-out figures.

    .venv/bin/python benchmarks/failure_classifier.py [--before COMMIT] [--misses]

Reads tests/fixtures/failure_logs/manifest.yml and classifies every log with
plugins/module_utils/_sglang/failure_classifier.py (standard library only, as on the node). Prints
accuracy per collection and split, and the held-out figure on its own line. `--before COMMIT`
also runs failure_classifier.py as it was at COMMIT on the same logs (logs that commit did
not have are still classified: the corpus is read from the working tree).

The split (docs/failure-classes.md, "The corpus"): collection 1 (the 48 logs the rules were
first written on) keeps the split recorded in the manifest; a log of collections 2 to 4 goes to
the held-out side when `int(sha256(url), 16) % 3 == 0`, so a thread's logs all sit on one side;
from collection 5 on a collection is held out whole until it has been measured and read
(collection 5 is dev now; collection 6 is held out). The script recomputes the rules and
refuses a manifest that disagrees with them.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fixtures" / "failure_logs"
MODULE = "plugins/module_utils/_sglang/failure_classifier.py"

Classifier = Callable[..., Any]


HELD_OUT_WHOLE = 5  # from collection 5 on: every log held out (gathered before the classifier changed)
# Collections measured held out and then read (misses studied, rules written from them): dev
# from then on. Collection 5 was measured twice, then read; collection 6 is the held-out one.
NOW_DEV = {5}


def split_of(url: str) -> str:
    return "holdout" if int(hashlib.sha256(url.encode()).hexdigest(), 16) % 3 == 0 else "dev"


def rule_split(collection: int, url: str) -> str:
    if collection in NOW_DEV:
        return "dev"
    return "holdout" if collection >= HELD_OUT_WHOLE else split_of(url)


def load_corpus() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = yaml.safe_load((CORPUS / "manifest.yml").read_text())
    for e in entries:
        e["collection"] = int(e.get("collection", 1))
        if e["collection"] > 1 and e["split"] != rule_split(e["collection"], e["url"]):
            raise SystemExit(
                f"manifest.yml: {e['file']}: split {e['split']!r} is not the rule's "
                f"{rule_split(e['collection'], e['url'])!r}"
            )
        e["lines"] = (CORPUS / e["file"]).read_text(encoding="utf-8").splitlines()
    return entries


def classifier_at(commit: str) -> Classifier:
    """failure_classifier.classify as it was at `commit` (run from the file's text)."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{commit}:{MODULE}"], capture_output=True, text=True, check=True
    ).stdout
    module = types.ModuleType(f"failure_classifier_at_{commit}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"failure_classifier.py@{commit}", "exec"), module.__dict__)
    fn: Classifier = module.__dict__["classify"]
    return fn


def measure(
    name: str, classify: Classifier, entries: list[dict[str, Any]], misses: bool
) -> dict[str, list[int]]:
    per: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for e in entries:
        rc = e.get("returncode", 1) if e["exited"] else None
        got = classify(e["lines"], exited=e["exited"], returncode=rc).failure_class
        ok = got == e["label"]
        for key in (f"collection {e['collection']} {e['split']}", f"all {e['split']}"):
            per[key][0] += ok
            per[key][1] += 1
        if misses and not ok:
            print(f"  {name}: {e['file']} ({e['split']}): labelled {e['label']}, classified {got}")
    for key, (ok, n) in sorted(per.items()):
        print(f"{name:>8} {key:<22} {ok:>3}/{n:<3} = {ok / n:.2f}")
    for title, colls in (("collections 2-4, sha256 rule", (2, 3, 4)), ("collection 6, whole", (6,))):
        held = [per[f"collection {c} holdout"] for c in colls if f"collection {c} holdout" in per]
        hok, hn = sum(v[0] for v in held), sum(v[1] for v in held)
        if hn:
            print(f"{name:>8} HELD-OUT ({title}): {hok}/{hn} = {hok / hn:.2f}")
    return per


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", metavar="COMMIT", help=f"also measure {MODULE} at COMMIT")
    parser.add_argument("--misses", action="store_true", help="list the logs classified wrongly")
    args = parser.parse_args()
    # Import this checkout's classifier, whatever collection path the environment points at.
    root = Path(tempfile.mkdtemp(prefix="fc-bench-"))
    (root / "ansible_collections" / "bwtune").mkdir(parents=True)
    (root / "ansible_collections" / "bwtune" / "sglang").symlink_to(REPO)
    sys.path.insert(0, str(root))
    from ansible_collections.bwtune.sglang.plugins.module_utils._sglang import failure_classifier

    if Path(failure_classifier.__file__).resolve() != (REPO / MODULE).resolve():
        raise SystemExit(f"imported {failure_classifier.__file__}, not {REPO / MODULE}")

    entries = load_corpus()
    if args.before:
        measure("before", classifier_at(args.before), entries, args.misses)
    measure("now", failure_classifier.classify, entries, args.misses)
    return 0


if __name__ == "__main__":
    sys.exit(main())
