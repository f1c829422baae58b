"""Fixtures: run the stand-in as a real subprocess on a free port, as the sweep would."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
FAKE_SMI_DIR = REPO / "src" / "bwtune" / "standin" / "bin"
BASE_FLAGS = [
    "--quantization", "modelopt_fp4",
    "--moe-runner-backend", "flashinfer_cutlass",
    "--fp4-gemm-backend", "flashinfer_cudnn",
    "--tp-size", "8",
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text()

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def post(self, path: str, body: object, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json", **(headers or {})}
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def wait_healthy(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"stand-in exited {self.proc.returncode}:\n{self.log()}")
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"stand-in not healthy in {timeout}s:\n{self.log()}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def standin_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("BWTUNE_STANDIN_FAULT", None)
    env.pop("BWTUNE_STANDIN_PROFILE", None)
    env["BWTUNE_STANDIN_STARTUP_SCALE"] = "0.002"
    env["BWTUNE_STANDIN_STATE_DIR"] = str(tmp_path / "gpu-state")
    env["PATH"] = f"{FAKE_SMI_DIR}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture
def launch(tmp_path: Path, standin_env: dict[str, str]) -> Iterator[Callable[..., Server]]:
    """launch(*flags, env={...}, model=path, port=None) -> Server (not yet waited for)."""
    started: list[Server] = []

    def _launch(
        *flags: str, env: dict[str, str] | None = None, model: Path | str = MODEL, port: int | None = None
    ) -> Server:
        port = port or free_port()
        log_path = tmp_path / f"standin-{port}-{len(started)}.log"
        argv = [
            sys.executable,
            "-m",
            "bwtune.standin",
            "--model-path",
            str(model),
            "--port",
            str(port),
            *flags,
        ]
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env={**standin_env, **(env or {})}, text=True
            )
        server = Server(proc, port, log_path)
        started.append(server)
        return server

    yield _launch
    for server in started:
        server.stop()


@pytest.fixture
def healthy(launch: Callable[..., Server]) -> Callable[..., Server]:
    def _healthy(*flags: str, env: dict[str, str] | None = None) -> Server:
        server = launch(*BASE_FLAGS, *flags, env=env)
        server.wait_healthy()
        return server

    return _healthy


@pytest.fixture
def smi(standin_env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the fake nvidia-smi found first on the test PATH."""

    def _smi(*args: str) -> subprocess.CompletedProcess[str]:
        exe = shutil.which("nvidia-smi", path=standin_env["PATH"])
        assert exe == str(FAKE_SMI_DIR / "nvidia-smi")
        return subprocess.run(
            [exe, *args], env=standin_env, capture_output=True, text=True, timeout=30, check=False
        )

    return _smi


@pytest.fixture
def model_dir() -> Path:
    return MODEL
