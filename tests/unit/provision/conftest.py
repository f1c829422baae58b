"""The nvcc-built test libraries of tests/unit/facts, for the wheel-reading tests."""

from tests.unit.facts.conftest import cuda_libs  # noqa: F401
