"""`bwtune --version` and `--help` answer at once: no command imports a heavy module
(scipy, about 1-2 s) before it needs it (issue 20 item 27)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("scipy",)


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["sweep", "--help"]])
def test_bwtune_starts_without_importing_scipy(argv: list[str]) -> None:
    probe = (
        "import sys\n"
        "from bwtune.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines()[-1] == "[]", done.stdout[-2000:]
