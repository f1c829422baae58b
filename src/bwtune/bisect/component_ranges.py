"""What a bisection searches: the stack components that differ, each with its versions.

Components are the ones a results line's `stack` records (stack_info.COMPONENTS), found
different by regression.changed_components, bisected one at a time in the declared order
(torch first: the others are built on it) unless the caller orders them. Each component's
versions run from the good value to the bad value, oldest first: torch nightlies by date,
SGLang commits in first-parent order, FlashInfer releases. A component without a list is
bisected over its two ends alone (it only says whether that change matters).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.bwtune.sglang.plugins.module_utils._facts import stack_info
from bwtune import regression

NAMES = dict(stack_info.COMPONENTS)
# A value that is a property of another component's version, not built on its own: the SGLang
# release follows its commit, the CUDA of torch's build follows the torch wheel. When its
# leader differs too, it is no component of its own (its value in between is the build's).
FOLLOWS = {"sglang": "sglang_commit", "cuda": "torch"}
# The host's, not built by a role: a bisection holds the host fixed.
NOT_BUILT = ("driver",)


class BisectError(ValueError):
    """Input a bisection cannot start from: one line naming the value."""


@dataclass(frozen=True)
class Candidate:
    value: str
    note: str = ""  # a commit's subject, a nightly's date


@dataclass(frozen=True)
class ComponentRange:
    key: str
    versions: tuple[Candidate, ...]  # versions[0] is the good value, versions[-1] the bad one

    @property
    def name(self) -> str:
        return NAMES.get(self.key, self.key)

    @property
    def good(self) -> str:
        return self.versions[0].value

    @property
    def bad(self) -> str:
        return self.versions[-1].value


Stack = Mapping[str, Any]


@dataclass(frozen=True)
class BisectPlan:
    good: Mapping[str, Any]
    bad: Mapping[str, Any]
    components: tuple[ComponentRange, ...]

    def component(self, key: str) -> ComponentRange:
        return next(c for c in self.components if c.key == key)

    def stack(self, changes: Mapping[str, str]) -> dict[str, Any]:
        """The good stack with `changes` ({component: version}). A follower that differs
        between the ends takes its leader's end's value at either end, else None (the build's:
        the CUDA of a torch nightly between the two is whatever that wheel was built for)."""
        stack = dict(self.good)
        stack.update(changes)
        for follower, leader in FOLLOWS.items():
            moved = self.good.get(follower) != self.bad.get(follower)
            if leader in changes and moved and follower not in self.keys():
                value = changes[leader]
                if value == self.bad.get(leader):
                    stack[follower] = self.bad.get(follower)
                elif value != self.good.get(leader):
                    stack[follower] = None
        return stack

    def keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.components)

    def to_dict(self) -> dict[str, Any]:
        return {
            "good": dict(self.good),
            "bad": dict(self.bad),
            "components": [
                {"key": c.key, "versions": [[v.value, v.note] for v in c.versions]} for c in self.components
            ],
        }


def _stack(side: Stack, which: str) -> dict[str, Any]:
    if not isinstance(side, Mapping):
        raise BisectError(f"the {which} stack: {side!r} is not a mapping of components")
    unknown = sorted(k for k in side if k not in NAMES and k != "fingerprint")
    if unknown:
        raise BisectError(f"the {which} stack: {unknown[0]!r} is not a stack component ({', '.join(NAMES)})")
    # Values as text: a version compares equal to the same version listed as a candidate.
    return {key: None if side.get(key) is None else str(side.get(key)) for key in NAMES}


def _versions(key: str, listed: Sequence[str | Candidate], good: Any, bad: Any) -> tuple[Candidate, ...]:
    versions = [v if isinstance(v, Candidate) else Candidate(str(v)) for v in listed]
    values = [v.value for v in versions]
    if not values:
        raise BisectError(
            f"candidates for {key}: the list is empty (it runs from the good {good} to the bad {bad})"
        )
    seen = set()
    for value in values:
        if value in seen:
            raise BisectError(f"candidates for {key}: {value} is listed twice")
        seen.add(value)
    for end, value in (("good", good), ("bad", bad)):
        if value not in seen:
            raise BisectError(f"candidates for {key}: the {end} value {value} is not in the list")
    first, last = values.index(str(good)), values.index(str(bad))
    if last < first:
        raise BisectError(
            f"candidates for {key}: the bad {bad} comes before the good {good} (the list runs oldest first)"
        )
    return tuple(versions[first : last + 1])


def make_plan(
    good: Stack,
    bad: Stack,
    candidates: Mapping[str, Sequence[str | Candidate]] | None = None,
    *,
    order: Sequence[str] | None = None,
) -> BisectPlan:
    """The plan between two stacks ({component: value}, as a results line's `stack`).

    `candidates` gives a component's versions; `order` the components to bisect and their
    order (default: every differing one, in stack_info.COMPONENTS' order). BisectError, one
    line, for what cannot be bisected."""
    good_stack, bad_stack = _stack(good, "good"), _stack(bad, "bad")
    changed = regression.changed_components({"stack": good_stack}, {"stack": bad_stack})
    differing = [c["component"] for c in changed]
    if not differing:
        raise BisectError(
            "the good and bad stacks are the same "
            f"(fingerprint {good.get('fingerprint') or bad.get('fingerprint')}): nothing to bisect"
        )
    for key in NOT_BUILT:
        if key in differing:
            raise BisectError(
                f"{NAMES[key]} differs ({good_stack[key]} -> {bad_stack[key]}): it is the host's, not built; "
                "measure the good and bad stacks on one host"
            )
    candidates = dict(candidates or {})
    for key in candidates:
        if key not in NAMES:
            raise BisectError(f"candidates for {key!r}: not a stack component ({', '.join(NAMES)})")
        if key not in differing:
            raise BisectError(f"candidates for {key}: the good and bad stacks both have {good_stack[key]}")
    led = [k for k in differing if not (k in FOLLOWS and FOLLOWS[k] in differing)]
    chosen = list(order) if order is not None else led
    if not chosen:
        raise BisectError("the component order is empty: name at least one component to bisect")
    for key in chosen:
        if key not in led:
            why = f"it follows {FOLLOWS[key]}" if key in differing else "the good and bad stacks agree on it"
            raise BisectError(f"component {key!r}: not one to bisect ({why}); differing: {', '.join(led)}")
    if len(set(chosen)) != len(chosen):
        raise BisectError(f"component order {', '.join(chosen)}: a component is named twice")
    components = tuple(
        ComponentRange(
            key,
            _versions(key, candidates[key], good_stack[key], bad_stack[key])
            if key in candidates
            else (Candidate(str(good_stack[key])), Candidate(str(bad_stack[key]))),
        )
        for key in chosen
    )
    # A differing component left out of the order stays at its good value in every step.
    return BisectPlan(good_stack, bad_stack, components)
