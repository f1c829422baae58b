"""Input a bisection cannot start from gets one clear line naming the value; a good plan
lists the differing components in order, with their versions from good to bad."""

from __future__ import annotations

from pathlib import Path

import pytest

from bwtune import regression
from bwtune.bisect.bisection import Bisection, Settings
from bwtune.bisect.component_ranges import BisectError, Candidate, make_plan
from tests.unit.bisect.simulated import COMMITS, FLASHINFER, GOOD, NIGHTLIES, World, commit_change, stack

BAD = stack(torch=NIGHTLIES[-1], cuda="13.1", sglang_commit="c63", sglang="0.5.24", flashinfer="0.7.0")


@pytest.mark.parametrize(
    ("good", "bad", "candidates", "order", "says"),
    [
        (
            GOOD,
            GOOD,
            {},
            None,
            "the good and bad stacks are the same (fingerprint f-good): nothing to bisect",
        ),
        (GOOD, BAD, {"sglang_commit": []}, None, "candidates for sglang_commit: the list is empty"),
        (GOOD, BAD, {"sglang_commit": COMMITS[1:]}, None, "the good value c00 is not in the list"),
        (GOOD, BAD, {"sglang_commit": COMMITS[::-1]}, None, "the bad c63 comes before the good c00"),
        (GOOD, BAD, {"sglang_commit": ["c00", "c07", "c07", "c63"]}, None, "c07 is listed twice"),
        (GOOD, BAD, {"sgl_kernel": ["0.3.21", "0.3.22"]}, None, "the good and bad stacks both have 0.3.21"),
        (GOOD, BAD, {"sglang_options": ["a"]}, None, "'sglang_options': not a stack component"),
        (GOOD, BAD, {}, ["cuda"], "component 'cuda': not one to bisect (it follows torch)"),
        (
            GOOD,
            BAD,
            {},
            ["sgl_kernel"],
            "component 'sgl_kernel': not one to bisect (the good and bad stacks agree",
        ),
        (GOOD, BAD, {}, [], "the component order is empty"),
        (GOOD, {**BAD, "driver": "590.1"}, {}, None, "NVIDIA driver differs (580.95.05 -> 590.1)"),
        (GOOD, {**BAD, "vllm": "1"}, {}, None, "the bad stack: 'vllm' is not a stack component"),
    ],
)
def test_bad_input_gets_one_clear_line(
    good: dict[str, str],
    bad: dict[str, str],
    candidates: dict[str, list[str]],
    order: list[str] | None,
    says: str,
) -> None:
    with pytest.raises(BisectError) as caught:
        make_plan(good, bad, candidates, order=order)
    message = str(caught.value)
    assert says in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (Settings(first_launches=1), "first launches 1: at least 2"),
        (Settings(max_launches=2), "max launches 2: at least the first launches (3)"),
        (Settings(goal="up"), "goal 'up': max or min"),
        (Settings(stats=regression.Settings(min_effect=2.0)), "--min-effect 2.0: a fraction between 0 and 1"),
    ],
)
def test_bad_settings_get_one_clear_line(tmp_path: Path, settings: Settings, says: str) -> None:
    plan = make_plan(GOOD, BAD)
    with pytest.raises(BisectError) as caught:
        Bisection(plan, World(commit_change(40)).measure, str(tmp_path), settings)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "bisect.jsonl").exists()  # refused before anything is written


def test_the_plan_orders_components_and_slices_their_lists() -> None:
    notes = [
        Candidate(c, f"subject of {c}") for c in ["b99", *COMMITS, "a01"]
    ]  # the list may run past both ends
    plan = make_plan(GOOD, BAD, {"sglang_commit": notes, "torch": NIGHTLIES, "flashinfer": FLASHINFER})
    assert plan.keys() == ("torch", "sglang_commit", "flashinfer")  # stack_info.COMPONENTS' order
    commits = plan.component("sglang_commit")
    assert [v.value for v in commits.versions] == COMMITS
    assert commits.versions[5].note == "subject of c05"
    assert make_plan(GOOD, BAD, order=["flashinfer", "torch"]).keys() == ("flashinfer", "torch")
    # A follower takes its leader's end value, and is the build's in between.
    assert plan.stack({"torch": NIGHTLIES[-1]})["cuda"] == "13.1"
    assert plan.stack({"torch": NIGHTLIES[3]})["cuda"] is None
    assert plan.stack({"torch": NIGHTLIES[0]})["cuda"] == GOOD["cuda"]
    same_cuda = make_plan(GOOD, stack(torch=NIGHTLIES[-1]), {"torch": NIGHTLIES})  # every nightly cu130
    assert same_cuda.stack({"torch": NIGHTLIES[3]})["cuda"] == GOOD["cuda"]
