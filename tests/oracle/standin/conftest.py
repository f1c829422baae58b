"""The stand-in fixtures of tests/unit/standin (a stand-in subprocess on a free port)."""

from tests.unit.standin.conftest import healthy, launch, standin_env  # noqa: F401
