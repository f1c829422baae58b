"""The stand-in reads SGLang's `--config FILE.yaml` as SGLang does (the server role passes the
API key that way, so the key is on no command line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bwtune.standin import config_file


def test_the_files_options_come_first_and_the_command_line_wins(tmp_path: Path) -> None:
    path = tmp_path / "api-key.yaml"
    path.write_text(json.dumps({"api-key": "k3y", "tp-size": 4, "enable-metrics": True, "x": False}) + "\n")
    merged = config_file.merge(
        ["--model-path", "/m", "--config", str(path), "--tp-size", "8"], {"enable-metrics"}
    )
    assert merged == ["--api-key", "k3y", "--tp-size", "4", "--enable-metrics", "--x", "false",
                      "--model-path", "/m", "--tp-size", "8"]  # fmt: skip
    assert config_file.merge(["--model-path", "/m"], set()) == ["--model-path", "/m"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--config", "a.yaml", "--config", "b.yaml"], "Multiple config files specified"),
        (["--config"], "No config file specified after --config flag"),
        (["--config", "a.json"], "Config file must be YAML format, got: .json"),
        (["--config", "/nonexistent/a.yaml"], "Config file not found: /nonexistent/a.yaml"),
    ],
)
def test_what_sglang_refuses_is_refused(argv: list[str], message: str) -> None:
    with pytest.raises(config_file.ConfigFileError, match=message):
        config_file.merge(argv, set())


def test_the_key_from_the_file_is_required_by_the_running_stand_in(healthy, tmp_path: Path) -> None:
    path = tmp_path / "api-key.yaml"
    path.write_text('{"api-key": "from-the-file"}\n')
    server = healthy("--config", str(path))
    assert server.get("/v1/models")[0] == 401
    assert server.get("/server_info", {"Authorization": "Bearer from-the-file"})[0] == 200
