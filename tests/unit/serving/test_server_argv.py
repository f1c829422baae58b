"""The server role's config: sources, the role's own flags, systemd quoting, the flag diff."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._serving import server_argv as sc


def test_flags_become_words_switches_and_lists() -> None:
    args = sc.flags_to_args(
        {"tp-size": 8, "--enable-dp-attention": True, "disable-radix-cache": False, "x": None, "l": [1, "a"]}
    )
    assert args == ["--tp-size", "8", "--enable-dp-attention", "--l", "1", "a"]


def test_bad_flag_name_is_named() -> None:
    with pytest.raises(sc.ServerConfigError, match=r"server_flags: 'Tp Size' is not a flag name"):
        sc.flags_to_args({"Tp Size": 8})


def test_role_flags_are_replaced_and_model_comes_first() -> None:
    config = ["--tp-size", "8", "--host", "0.0.0.0", "--port", "1", "--api-key", "leak", "--enable-metrics"]
    args = sc.server_args(config, model_path="/m", host="127.0.0.1", port=30000)
    assert args == [
        "--model-path", "/m", "--tp-size", "8", "--host", "127.0.0.1", "--port", "30000",
        "--config", "/etc/bwtune/server/api-key.yaml",
    ]  # fmt: skip
    assert "leak" not in args


def test_the_api_key_is_in_sglangs_config_file_never_on_the_command_line() -> None:
    """`ps` shows every command line to every local user: the key is read from a file."""
    args = sc.server_args(["--tp-size", "8"], model_path="/m", host="h", port=1, api_key_config="/k.yaml")
    assert args[-2:] == ["--config", "/k.yaml"]
    assert "--api-key" not in args and not any("$" in w for w in args)
    assert sc.record_args(args, api_key=True) == args[:-2]
    assert sc.record_args(args[:-2], api_key=False) == args[:-2]
    # SGLang takes one --config: a config with its own would lose the key (or fail), so it is refused.
    with pytest.raises(sc.ServerConfigError, match=r"--config mine.yaml: the server role gives SGLang"):
        sc.server_args(["--config", "mine.yaml"], model_path="/m", host="h", port=1)
    own = sc.server_args(["--config", "mine.yaml"], model_path="/m", host="h", port=1, api_key=False)
    assert own[-2:] == ["--port", "1"] and own[2:4] == ["--config", "mine.yaml"]
    # The file's text is JSON, which SGLang's yaml.safe_load reads as {"api-key": KEY}.
    text = sc.api_key_config_text("k3y/with+odd=chars")
    assert yaml.safe_load(text) == {"api-key": "k3y/with+odd=chars"} == json.loads(text)


def test_model_path_from_config_when_the_variable_is_empty() -> None:
    args = sc.server_args(["--model-path", "/from/result"], model_path=None, host="h", port=1, api_key=False)
    assert args[:2] == ["--model-path", "/from/result"]
    with pytest.raises(sc.ServerConfigError, match="bwtune_model_path"):
        sc.server_args(["--tp-size", "8"], model_path=None, host="h", port=1)


def test_multinode_flags() -> None:
    args = sc.server_args(
        [], model_path="/m", host="h", port=1, nnodes=2, node_rank=1, dist_init_addr="10.0.0.1:20000",
        api_key=False,
    )  # fmt: skip
    assert args[-6:] == ["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:20000"]
    with pytest.raises(sc.ServerConfigError, match=r"node rank 2 is outside 0\.\.1"):
        sc.server_args([], model_path="/m", host="h", port=1, nnodes=2, node_rank=2, dist_init_addr="a:1")


def test_exec_start_quotes_every_word_and_systemd_expands_none() -> None:
    line = sc.exec_start(["/opt/py"], ["--x", 'a "b" 50% $HOME \\n', "--y", "tab\there\x01"])
    assert line == '"/opt/py" "--x" "a \\"b\\" 50%% $$HOME \\\\n" "--y" "tab\\x09here\\x01"'
    with pytest.raises(sc.ServerConfigError, match="line break"):
        sc.exec_start(["/opt/py"], ["a\nb"])


def test_a_matrix_value_that_names_the_key_variable_stays_a_literal_word() -> None:
    """Issue 21 #14: `${BWTUNE_SERVER_API_KEY}` as a value must not become the key itself."""
    args = sc.server_args(
        ["--served-model-name", "${BWTUNE_SERVER_API_KEY}", "--x", "%H"], model_path="/m", host="h", port=1
    )
    line = sc.exec_start(["/opt/py"], args)
    assert '"--served-model-name" "$${BWTUNE_SERVER_API_KEY}" "--x" "%%H"' in line
    assert " ${" not in line and not re.search(
        r"(?<![$%])[$%](?![$%])", line.replace("$$", "").replace("%%", "")
    )
    assert sc.record_args(args, api_key=True)[2:6] == [
        "--served-model-name",
        "${BWTUNE_SERVER_API_KEY}",
        "--x",
        "%H",
    ]


MATRIX_WORDS = [
    "${BWTUNE_SERVER_API_KEY}",
    "$HOME",
    "50%",
    "%h",
    "%%",
    'a "quoted" word',
    "back\\slash",
    "",
    "; rm -rf /",
    "tab\tx",
]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (Debian: systemd)")
def test_systemd_analyze_verify_accepts_every_quoted_word(tmp_path: Path) -> None:
    args = []
    for word in MATRIX_WORDS:
        args += ["--served-model-name", word]
    unit = tmp_path / "bwtune-quoting.service"
    unit.write_text(f"[Service]\nExecStart={sc.exec_start([shutil.which('true') or '/bin/true'], args)}\n")
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and "bwtune-quoting" not in done.stdout + done.stderr, (
        done.stdout + done.stderr
    )
    # The same words unescaped are refused: the check tells quoting apart.
    raw = " ".join(f'"{w}"' for w in ["/bin/true", "%h", "50%x"])
    unit.write_text(f"[Service]\nExecStart={raw}\n")
    bad = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert bad.returncode != 0 and "specifier" in bad.stdout + bad.stderr


def _results(tmp_path: Path, *lines: dict) -> str:
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_results_file_source_takes_the_latest_ok_line(tmp_path: Path) -> None:
    path = _results(
        tmp_path,
        {"config_id": "c1", "status": "ok", "argv": ["--model-path", "/m", "--tp-size", "4"]},
        {
            "config_id": "c1",
            "status": "ok",
            "argv": ["python", "-m", "sglang.launch_server", "--tp-size", "8"],
        },
        {"config_id": "c2", "status": "oom", "argv": ["--tp-size", "2"]},
    )
    got = sc.config_args(results_file=path, config_id="c1")
    assert got == {"args": ["--tp-size", "8"], "source": f"{path} (c1)", "config_id": "c1"}
    with pytest.raises(sc.ServerConfigError, match=r"c2 in .* has status 'oom'"):
        sc.config_args(results_file=path, config_id="c2")
    with pytest.raises(sc.ServerConfigError, match="c9 has no line"):
        sc.config_args(results_file=path, config_id="c9")


def test_one_source_only() -> None:
    with pytest.raises(sc.ServerConfigError, match="one source; got server_flags, server_args"):
        sc.config_args(flags={"tp-size": 8}, args=["--tp-size", "8"])
    with pytest.raises(sc.ServerConfigError, match="server_config_id is empty"):
        sc.config_args(results_file="/r.jsonl")
    # Without a results file, the id labels the config.
    assert sc.config_args(args=["--tp-size", "8"], config_id="c1")["config_id"] == "c1"


def test_changed_flags() -> None:
    old = ["--model-path", "/m", "--tp-size", "8", "--enable-metrics", "--moe-runner-backend", "triton"]
    new = ["--model-path", "/m", "--tp-size", "4", "--moe-runner-backend=triton", "--cuda-graph-max-bs", "64"]
    assert sc.changed_flags(old, new) == [
        {"flag": "cuda-graph-max-bs", "old": None, "new": "64"},
        {"flag": "enable-metrics", "old": True, "new": None},
        {"flag": "tp-size", "old": "8", "new": "4"},
    ]
    assert sc.changed_flags(None, ["--tp-size", "8"]) == [{"flag": "tp-size", "old": None, "new": "8"}]
