from __future__ import annotations

import shlex

import yaml

from bwtune.report import launch

RESULT = {
    "id": "c0123456789",
    "host": "gpu-a",
    "flags": {
        "model-path": "/models/My Model's dir",
        "tp-size": 8,
        "trust-remote-code": True,
        "enable-dp-attention": False,
        "json-model-override-args": {"rope_scaling": {"factor": 2}},
        "served-model-name": "qwen; rm -rf /",
    },
    "argv": [],
}


def test_launch_command_is_quoted_and_round_trips() -> None:
    command = launch.launch_command(RESULT)
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    assert argv[3:] == [
        "--model-path", "/models/My Model's dir", "--tp-size", "8", "--trust-remote-code",
        "--json-model-override-args", '{"rope_scaling":{"factor":2}}',
        "--served-model-name", "qwen; rm -rf /",
    ]  # fmt: skip
    # The multi-line form is the same command for a shell.
    assert shlex.split(launch.launch_command(RESULT, multiline=True).replace("\\\n", "")) == argv


def test_argv_from_the_plan_wins_and_loses_its_interpreter_prefix() -> None:
    result = {**RESULT, "argv": ["/usr/bin/python3", "-m", "sglang.launch_server", "--tp", "4"]}
    assert launch.launch_argv(result) == ["python", "-m", "sglang.launch_server", "--tp", "4"]
    bare = {**RESULT, "argv": ["--model-path", "/m", "--tp", "2"]}
    assert launch.launch_argv(bare)[3:] == ["--model-path", "/m", "--tp", "2"]


def test_host_vars_snippet_is_yaml_for_the_server_role() -> None:
    snippet = launch.host_vars_snippet(RESULT, run_id="r1")
    assert snippet.startswith("# host_vars/gpu-a.yml: config c0123456789, best of run r1\n")
    loaded = yaml.safe_load(snippet)
    assert loaded["bwtune_model_path"] == "/models/My Model's dir"
    flags = loaded["server_flags"]
    assert "model-path" not in flags
    assert flags["tp-size"] == 8 and flags["trust-remote-code"] is True
    assert flags["json-model-override-args"] == {"rope_scaling": {"factor": 2}}
