from __future__ import annotations

import shlex

import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._serving.server_argv import flags_to_args
from bwtune.report import launch

LAUNCH = ["/opt/bwtune/stacks/ab12/bin/python", "-m", "sglang.launch_server"]
ARGV = [
    "--model-path", "/models/My Model's dir", "--tp-size", "8", "--trust-remote-code",
    "--json-model-override-args", '{"rope_scaling":{"factor":2}}',
    "--served-model-name", "qwen; rm -rf /",
    "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
]  # fmt: skip
RESULT = {
    "id": "c0123456789",
    "host": "gpu-a",
    # The planner's recorded resolution: SGLang runs NEXTN as EAGLE and sets the draft tokens.
    "flags": {
        "model-path": "/models/My Model's dir",
        "tp-size": 8,
        "trust-remote-code": True,
        "json-model-override-args": {"rope_scaling": {"factor": 2}},
        "served-model-name": "qwen; rm -rf /",
        "speculative-algorithm": "EAGLE",
        "speculative-num-steps": 3,
        "speculative-num-draft-tokens": 4,
        "enable-dp-attention": False,
    },
    "argv": ARGV,
    "launch_command": LAUNCH,
}


def test_launch_command_is_the_recorded_command_quoted_and_round_trips() -> None:
    argv = shlex.split(launch.launch_command(RESULT))
    assert argv == [*LAUNCH, *ARGV]
    # The multi-line form is the same command for a shell.
    assert shlex.split(launch.launch_command(RESULT, multiline=True).replace("\\\n", "")) == argv


def test_no_interpreter_is_invented_when_the_node_recorded_none() -> None:
    old = {**RESULT, "launch_command": []}
    command = launch.launch_command(old)
    assert command.startswith("# the node did not record its launch command")
    assert "sglang.launch_server" not in command and command.endswith(shlex.join(ARGV))


def test_host_vars_are_the_measured_arguments_typed_for_the_server_role() -> None:
    snippet = launch.host_vars_snippet(RESULT, run_id="r1")
    assert snippet.startswith("# host_vars/gpu-a.yml: config c0123456789, best of run r1\n")
    loaded = yaml.safe_load(snippet)
    assert loaded["bwtune_model_path"] == "/models/My Model's dir"
    flags = loaded["server_flags"]
    assert "model-path" not in flags
    assert flags["tp-size"] == 8 and flags["trust-remote-code"] is True
    # The server role turns them back into exactly the measured arguments.
    assert flags_to_args(flags) == ARGV[2:]


def test_launch_command_and_host_vars_agree_and_both_name_the_resolution() -> None:
    loaded = yaml.safe_load(launch.host_vars_snippet(RESULT))
    command = launch.launch_command(RESULT)
    assert loaded["server_flags"]["speculative-algorithm"] == "NEXTN" and "NEXTN" in command
    assert launch.resolution(RESULT) == [
        "speculative-algorithm NEXTN -> EAGLE",
        "speculative-num-draft-tokens (not given) -> 4",
    ]
    assert "# SGLang resolves: speculative-algorithm NEXTN -> EAGLE\n" in launch.host_vars_snippet(RESULT)
