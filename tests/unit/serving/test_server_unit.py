"""The server role's unit file: rendered from the role's template, scored by systemd-analyze.

`systemd-analyze security --offline=true` (systemd >= 252) scores a unit file without a
running systemd. The score recorded in roles/server/README.md must not get worse.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "server"
# The exposure recorded in roles/server/README.md ("Exposure score"); lower is safer.
README_SCORE = re.compile(r"`systemd-analyze security` exposure: \*\*(\d+\.\d)\*\*")


def render_unit(**overrides: object) -> str:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables = {
        **defaults,
        "ansible_managed": "Ansible managed",
        "server_resolved": {
            "source": "server_flags",
            "config_id": None,
            "exec_start": '"/opt/bwtune/stacks/current/bin/python" "-m" "sglang.launch_server"',
        },
        "server_stack_dir": {"stat": {"exists": True, "lnk_source": "/opt/bwtune/stacks/abc"}},
        **overrides,
    }
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True)
    return env.from_string((ROLE / "templates" / "sglang.service.j2").read_text()).render(variables)


def exposure(unit_text: str, tmp_path: Path) -> float:
    unit = tmp_path / "bwtune-sglang.service"
    unit.write_text(unit_text)
    done = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d)", done.stdout + done.stderr)
    assert found, done.stdout + done.stderr
    return float(found.group(1))


def test_unit_has_the_hardening_and_the_two_environment_files() -> None:
    text = render_unit()
    for line in (
        "User=bwtune-sglang",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=/var/lib/bwtune-sglang /var/cache/bwtune-sglang",
        "PrivateTmp=yes",
        "ProtectHome=yes",
        "EnvironmentFile=/etc/bwtune/server/environment",
    ):
        assert line in text.splitlines(), line


def test_the_api_key_is_read_from_a_file_never_from_the_command_line() -> None:
    """Issue 20 #29: `ps` shows a command line to every local user (ProtectProc= hides other
    processes from the service, not the service from other users)."""
    from ansible_collections.bwtune.sglang.plugins.module_utils._serving import server_argv as sc

    args = sc.server_args(["--tp-size", "8"], model_path="/m", host="127.0.0.1", port=30000)
    line = sc.exec_start(["/opt/bwtune/stacks/current/bin/python", "-m", "sglang.launch_server"], args)
    text = render_unit(server_resolved={"source": "server_flags", "config_id": None, "exec_start": line})
    exec_line = next(x for x in text.splitlines() if x.startswith("ExecStart="))
    assert exec_line.endswith('"--config" "/etc/bwtune/server/api-key.yaml"')
    assert "api-key" not in exec_line.replace("api-key.yaml", "") and "BWTUNE_SERVER_API_KEY" not in text
    assert "EnvironmentFile=/etc/bwtune/server/api-key.env" not in text.splitlines()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (systemd >= 252)")
def test_exposure_is_no_worse_than_the_readme_says(tmp_path: Path) -> None:
    recorded = README_SCORE.search((ROLE / "README.md").read_text())
    assert recorded, "roles/server/README.md records no exposure score"
    score = exposure(render_unit(), tmp_path)
    assert score <= float(recorded.group(1)), (
        f"exposure {score} is worse than the README's {recorded.group(1)}"
    )
    # The measurement itself tells hardening apart: the same unit without it scores worse.
    hardening = ("Protect", "NoNewPriv", "Restrict")
    bare = "\n".join(line for line in render_unit().splitlines() if not line.startswith(hardening))
    assert exposure(bare, tmp_path) > score
