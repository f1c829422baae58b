"""The failure classifier on real SGLang logs from public issue threads.

Two collections (docs/failure-classes.md, "The corpus"). Collection 1 (48 logs): every dev
log, and 6 of the 7 holdout logs, which were gathered and labelled after the rules were
written (the seventh, SGLang's newer "leave no GPU memory for the KV cache" wording, was
missed and then added). Collection 2 (39 logs, issue 23): split by the thread's address,
`sha256(url) % 3 == 0` -> holdout, fixed before the classifier was changed; the rules were
then changed on its dev side only. Its floors are the figures reached: 29 of 29 dev, and 9 of
10 holdout, measured once after the change (23/29 and 8/10 before). Collection 3 (18 logs) was
gathered and labelled after the change, split by the same rule and each log measured once as
it was added; its two dev misses (logs 93 and 105) were then added as rules: 11/11 dev, 5/7
holdout. Collection 4 (23 logs, issue 23's second round): split by the same rule and committed
before the classifier was changed, measured once (9/15 dev, 5/8 holdout); the rules were then
changed on its dev side only. Collection 5 (17 logs, issue 23's third round): held out whole
(not by the sha256 rule), committed before the classifier was changed again, measured once
then (12/17) and once after the divisibility rule (12/17); that rule, read from dev threads
119, 121 and 124, also turned collection 4's held-out log 120 into a hit (6/8). Its misses were
then read, so collection 5 is dev now (14/17 after the two rules written from dev logs 135 and
136). Collection 6 (31 logs, issue 23's fourth round): held out whole, committed (579cbf1)
before the classifier was changed, measured once before (16/31) and once after (16/31).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract
from ansible_collections.bwtune.sglang.plugins.module_utils._sglang.failure_classifier import classify

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "failure_logs"
# (collection, split) -> correctly classified logs at least.
FLOORS = {
    (1, "dev"): 41,
    (1, "holdout"): 6,
    (2, "dev"): 29,
    (2, "holdout"): 9,
    (3, "dev"): 11,
    (3, "holdout"): 5,
    (4, "dev"): 9,
    (4, "holdout"): 6,
    (5, "dev"): 14,
    (6, "holdout"): 16,
}
HELD_OUT_WHOLE = 5  # from collection 5 on, a collection is gathered held out whole
# Collections measured held out and then read (their misses studied, rules written from
# them): dev from then on. Collection 5 was measured twice and its misses read.
NOW_DEV = {5}


def split_of(url: str) -> str:
    """Collection 2's split rule: a whole thread goes to one side, by its address."""
    return "holdout" if int(hashlib.sha256(url.encode()).hexdigest(), 16) % 3 == 0 else "dev"


def rule_split(coll: int, url: str) -> str:
    """Collections 2-4 split by the thread's address; collection 5 on are held out whole,
    until measured and read (NOW_DEV)."""
    if coll in NOW_DEV:
        return "dev"
    return "holdout" if coll >= HELD_OUT_WHOLE else split_of(url)


def collection(entry: dict[str, Any]) -> int:
    return int(entry.get("collection", 1))


def corpus() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = yaml.safe_load((CORPUS / "manifest.yml").read_text())
    return entries


def classified(entry: dict[str, Any]) -> str:
    lines = (CORPUS / entry["file"]).read_text(encoding="utf-8").splitlines()
    rc = entry.get("returncode", 1) if entry["exited"] else None
    return classify(lines, exited=entry["exited"], returncode=rc).failure_class


def test_corpus_is_real_logs_with_their_threads():
    entries = corpus()
    assert len(entries) >= 145
    files = sorted(p.name for p in CORPUS.glob("*.log"))
    assert files == sorted(e["file"] for e in entries)  # every log listed once, none missing
    for e in entries:
        assert e["url"].startswith("https://github.com/"), e
        assert "/issues/" in e["url"] or "/pull/" in e["url"], e
        assert e["label"] in results_contract.STARTUP_FAILURES, e
        assert (collection(e), e["split"]) in FLOORS and e["why"].strip(), e
        assert isinstance(e["exited"], bool), e
        assert (CORPUS / e["file"]).read_text(encoding="utf-8").strip(), e


def test_a_thread_sits_on_one_side_and_later_collections_are_split_by_their_address():
    entries = corpus()
    sides: dict[str, set[tuple[int, str]]] = {}
    for e in entries:
        sides.setdefault(e["url"], set()).add((collection(e), e["split"]))
    assert all(len(s) == 1 for s in sides.values()), sides
    later = [e for e in entries if collection(e) >= 2]
    assert len(later) >= 80
    for e in later:
        assert e["split"] == rule_split(collection(e), e["url"]), e
    first_threads = {e["url"] for e in entries if collection(e) == 1}
    assert not first_threads & {e["url"] for e in later}  # no thread the rules were read on
    # A held-out-whole collection shares no thread with any earlier collection.
    for coll in {collection(e) for e in entries if collection(e) >= HELD_OUT_WHOLE}:
        earlier = {e["url"] for e in entries if collection(e) < coll}
        assert not earlier & {e["url"] for e in entries if collection(e) == coll}, coll


@pytest.mark.parametrize(("coll", "split"), sorted(FLOORS))
def test_classifier_keeps_its_measured_accuracy(coll, split):
    entries = [e for e in corpus() if (collection(e), e["split"]) == (coll, split)]
    misses = [f"{e['file']}: {e['label']} -> {classified(e)}" for e in entries if classified(e) != e["label"]]
    assert len(entries) - len(misses) >= FLOORS[(coll, split)], misses


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
