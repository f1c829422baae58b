"""Bisection between a good and a bad stack (issue 28): the decision engine and its plan.

`component_ranges` says what differs and each component's ordered versions; `search` walks one
component's list like `git bisect`; `verdict` calls a step good-like, bad-like or undecided
with the regression statistics; `log` keeps every measurement so a killed bisection resumes;
`bisection` drives them over a measure function; `findings` is what comes out. `from_runs`
makes the plan from two stored runs (`bwtune bisect GOOD BAD`: what differs, the candidates,
the most steps, launches and builds, the stored runs' verdict). Building stacks and
launching servers for the steps are not built yet (docs/bisect.md).
"""
