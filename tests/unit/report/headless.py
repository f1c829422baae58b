"""Drive Debian's chromium headless: the rendered DOM, console messages and a screenshot."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ENSURE = Path(__file__).with_name("ensure_chromium.sh")
# No network, no background services, no profile left behind.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
]


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        subprocess.run([str(ENSURE)], check=True, timeout=900)
        found = shutil.which("chromium")
    assert found, "chromium is not installed"
    return found


@dataclass(frozen=True)
class Page:
    dom: str
    log: str  # chromium's stderr with console messages (--enable-logging=stderr)


def load(html: Path, *, timeout: float = 90.0) -> Page:
    """Load a page, let its scripts run, and return the DOM after them plus the console log."""
    with tempfile.TemporaryDirectory(prefix="bwtune-chromium-") as profile:
        proc = subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=3000", "--dump-dom", html.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return Page(proc.stdout, proc.stderr)


def screenshot(html: Path, png: Path, *, size: str = "1400,2000", timeout: float = 90.0) -> Path:
    with tempfile.TemporaryDirectory(prefix="bwtune-chromium-") as profile:
        proc = subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", f"--window-size={size}",
             f"--screenshot={png.resolve()}", html.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    assert proc.returncode == 0 and png.exists(), proc.stderr[-2000:]
    return png


def console_errors(log: str) -> list[str]:
    """Console errors and uncaught exceptions from chromium's stderr log."""
    return [
        line
        for line in log.splitlines()
        if ("CONSOLE" in line and ("Uncaught" in line or ":ERROR:" in line or "error" in line.lower()))
        or "Uncaught" in line
    ]
