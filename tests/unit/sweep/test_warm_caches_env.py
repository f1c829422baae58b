"""Every sweep launch gets one shared start-up cache directory in its environment (FlashInfer,
Triton, TorchInductor, CUDA, DeepGEMM, SGLang's own), laid out as the served SGLang's, and
what the user puts in sweep_env wins over it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2
import pytest

from ansible_collections.bwtune.sglang.plugins.filter import startup_cache_layout
from ansible_collections.bwtune.sglang.plugins.module_utils._server import launcher
from ansible_collections.bwtune.sglang.plugins.module_utils._sweep import sweep_runner, sweep_state

REPO = Path(__file__).resolve().parents[3]
SERVER_ENV = REPO / "roles" / "server" / "templates" / "environment.j2"
MATRIX: dict[str, Any] = {
    "model": {"path": "/models/qwen"},
    "hardware": {"gpu": "sm120", "count": 8},
    "sglang": {"version": "0.5.23"},
    "base": {"tp-size": 8, "quantization": "modelopt_fp4"},
    "axes": {"moe-runner-backend": ["flashinfer_cutlass"]},
}
CACHE_VARS = {
    "XDG_CACHE_HOME": "",
    "FLASHINFER_WORKSPACE_BASE": "",
    "SGLANG_CACHE_DIR": "",
    "TRITON_CACHE_DIR": "/triton",
    "TORCHINDUCTOR_CACHE_DIR": "/inductor",
    "CUDA_CACHE_PATH": "/nv",
    # SGLang overwrites DG_JIT_CACHE_DIR from SGLANG_DG_CACHE_DIR: both point at one place.
    "SGLANG_DG_CACHE_DIR": "/deep_gemm",
    "DG_JIT_CACHE_DIR": "/deep_gemm",
}


def options(tmp_path: Path, **params: Any) -> sweep_runner.SweepOptions:
    return sweep_runner.SweepOptions(
        matrix=MATRIX, results_path=str(tmp_path / "r1" / "results.jsonl"), **params
    )


def test_a_launch_env_carries_every_cache_variable_under_the_cache_dir(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = options(tmp_path, cache_dir=str(cache)).launch_env("marker")
    assert {k: env[k] for k in CACHE_VARS} == {k: f"{cache}{sub}" for k, sub in CACHE_VARS.items()}
    assert env[launcher.SERVER_MARKER] == "marker"


def test_sweep_env_and_secret_env_win_over_the_cache_defaults(tmp_path: Path) -> None:
    env = options(
        tmp_path,
        cache_dir=str(tmp_path / "cache"),
        env={"TRITON_CACHE_DIR": "/fast/triton", "OTHER": "1"},
        secret_env={"XDG_CACHE_HOME": "/secret"},
    ).launch_env("marker")
    assert env["TRITON_CACHE_DIR"] == "/fast/triton" and env["OTHER"] == "1"
    assert env["XDG_CACHE_HOME"] == "/secret"
    assert env["FLASHINFER_WORKSPACE_BASE"] == str(tmp_path / "cache")


def test_no_cache_dir_leaves_the_environment_alone(tmp_path: Path) -> None:
    for value in (None, ""):
        env = options(tmp_path, cache_dir=value).launch_env("marker")
        assert not set(env) & set(CACHE_VARS)


def test_a_home_relative_cache_dir_is_expanded_on_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    env = options(tmp_path, cache_dir="~/cache").launch_env("marker")
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "cache" / "triton")


def test_the_sweep_starts_each_server_with_that_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = options(tmp_path, cache_dir=str(tmp_path / "cache"), env={"CUDA_CACHE_PATH": "/mine"})
    the_plan = sweep_runner.make_plan(opts)
    seen: dict[str, str] = {}

    def start_server(argv: Any, **kwargs: Any) -> Any:
        seen.update(kwargs["env"])
        raise OSError("not started in this test")

    monkeypatch.setattr(launcher, "start_server", start_server)
    Path(opts.results_path).parent.mkdir(parents=True)
    runner = sweep_runner.Sweep(opts, the_plan)
    config = runner.configs[the_plan["launches"][0]["config"]]
    progress = sweep_state.Progress(opts.results_path, opts.run_id, 1)
    with pytest.raises(sweep_runner.SweepFailed, match="cannot start the server"):
        runner.launch(config, progress)
    assert seen["FLASHINFER_WORKSPACE_BASE"] == str(tmp_path / "cache")
    assert seen["CUDA_CACHE_PATH"] == "/mine"


def render_server_env(cache_dir: str = "/c") -> str:
    """environment.j2 as the template module renders it (trim_blocks), with the filter it uses."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True)
    env.filters["bwtune.sglang.startup_cache_layout"] = startup_cache_layout.startup_cache_layout
    return env.from_string(SERVER_ENV.read_text()).render(
        ansible_managed="managed", server_state_dir="/s", server_cache_dir=cache_dir, server_env={"A": "1"}
    )


def test_the_served_sglang_uses_the_same_layout() -> None:
    """The promoted server finds the sweep's caches only where the sweep put them."""
    lines = dict(re.findall(r"^([A-Z_]+)=/c(\S*)$", render_server_env("/c"), re.MULTILINE))
    assert {k: v for k, v in lines.items() if k != "HF_HOME"} == CACHE_VARS
    assert launcher.startup_cache_env("/c") == {k: "/c" + sub for k, sub in CACHE_VARS.items()}


def test_the_server_template_holds_no_copy_of_the_layout() -> None:
    """environment.j2 gets the layout from launcher.STARTUP_CACHE_LAYOUT (the filter), so a
    variable added there reaches the served SGLang too; the rendered file keeps its order."""
    template = SERVER_ENV.read_text()
    assert "bwtune.sglang.startup_cache_layout" in template
    assert not [name for name, _sub in launcher.STARTUP_CACHE_LAYOUT if f"{name}=" in template]
    rendered = [line.split("=", 1)[0] for line in render_server_env().splitlines() if "=/c" in line]
    layout = [name for name, _sub in launcher.STARTUP_CACHE_LAYOUT]
    assert rendered == [layout[0], "HF_HOME", *layout[1:]]
    assert "HF_HOME=/c/huggingface" in render_server_env().splitlines()


def test_the_filter_joins_the_layout_as_text() -> None:
    """Not normalised: the rendered file is the one the template wrote before the filter."""
    pairs = startup_cache_layout.startup_cache_layout("/var/cache/s")
    assert pairs == [[name, "/var/cache/s" + sub] for name, sub in CACHE_VARS.items()]
    assert startup_cache_layout.FilterModule().filters() == {
        "startup_cache_layout": startup_cache_layout.startup_cache_layout
    }
