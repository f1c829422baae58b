"""Two systemd test hosts with a stand-in "stack", shared by the server and promote tests.

The stack is what an operator's is, with the stand-in in SGLang's place: a venv at
/opt/bwtune/stacks/standin holding the bwtune wheel (the stand-in and the collection's
module_utils it uses) and PyYAML, installed offline from wheels built here, and the
symlink /opt/bwtune/stacks/current -> it. The checkpoint is the fixture model's config
files (the stand-in reads no weights). Booted once per session and Debian release
(testhosts' factory tears them down); the venv is made by the hosts' own python3 (3.11 on
bookworm, 3.13 on trixie), so PyYAML's wheel is the one for that Python.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.hosts.conftest import session_release

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "tests" / "fixtures" / "models" / "qwen35-397b-a17b-nvfp4"
UNIT = "bwtune-sglang.service"
MODEL_PATH = "/models/qwen35"
GOOD_FLAGS = {"tp-size": 8, "quantization": "modelopt_fp4", "moe-runner-backend": "flashinfer_cutlass"}

STACK_PLAY = """
- hosts: testhosts
  gather_facts: false
  tasks:
    - ansible.builtin.copy: {src: "{{ wheels }}/", dest: /root/wheels/, mode: "0644"}
    - ansible.builtin.command:
        cmd: python3 -m venv /opt/bwtune/stacks/standin
        creates: /opt/bwtune/stacks/standin/bin/python
    - ansible.builtin.find: {paths: /root/wheels, patterns: "*.whl"}
      register: found
    - ansible.builtin.command:
        argv: "{{ ['/opt/bwtune/stacks/standin/bin/pip', 'install', '-q', '--no-index', '--no-deps']
                  + (found.files | map(attribute='path') | list) }}"
    - ansible.builtin.file: {src: /opt/bwtune/stacks/standin, dest: /opt/bwtune/stacks/current, state: link}
    - ansible.builtin.copy: {src: "{{ model }}/", dest: "MODEL_PATH/", mode: "0644"}
""".replace("MODEL_PATH", MODEL_PATH)

# The server role with the stand-in as SGLang; each test adds its config as extra vars.
SERVE_PLAY = """
- hosts: "{{ target | default('testhosts') }}"
  gather_facts: false
  roles:
    - role: bwtune.sglang.server
"""
STANDIN_VARS: dict[str, Any] = {
    "bwtune_model_path": MODEL_PATH,
    "server_launch_command": ["/opt/bwtune/stacks/current/bin/python", "-m", "bwtune.standin"],
    "server_env": {"BWTUNE_STANDIN_STARTUP_SCALE": "0.002"},
    "server_health_timeout_s": 60,
    "server_restart_sec": 1,
    "ansible_pipelining": True,  # one SSH round trip per task
}

_BOOTED: dict[str, Any] = {}


def build_wheels(into: Path, python: str) -> Path:
    """The bwtune wheel (pure Python) and PyYAML's wheel for CPython `python` ("3.13")."""
    into.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(into), str(REPO)], check=True
    )
    version = yaml.__version__
    subprocess.run(
        [*pip, "download", "--no-deps", "--only-binary=:all:", f"--python-version={python}",
         "-d", str(into), f"PyYAML=={version}"],
        check=True,
    )  # fmt: skip
    return into


def serving_hosts(make_testhosts: Any, work: Path, release: str | None = None) -> Any:
    """Two booted hosts of `release` (None: the session's) with the stand-in stack and the
    model's config files (once per session and release)."""
    release = release or session_release()
    if release not in _BOOTED:
        hosts = make_testhosts(2, release=release)
        wheels = build_wheels(work / "wheels", hosts.python_version())
        (work / "stack.yml").write_text(STACK_PLAY)
        (hosts.dir / "serve.yml").write_text(SERVE_PLAY)
        done = hosts.playbook(work / "stack.yml", "-e", f"wheels={wheels}", "-e", f"model={MODEL}")
        assert done.returncode == 0, done.stdout[-3000:]
        _BOOTED[release] = hosts
    return _BOOTED[release]


def serve(
    hosts: Any, variables: dict[str, Any], *extra: str, log: Path | None = None
) -> subprocess.CompletedProcess:
    """Run the server role on the hosts with the stand-in vars plus `variables` (JSON extra vars)."""
    env_log = ["-e", json.dumps({**STANDIN_VARS, **variables})]
    if log is None:
        return hosts.playbook(hosts.dir / "serve.yml", *env_log, *extra)
    cmd = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        str(hosts.inventory),
        str(hosts.dir / "serve.yml"),
    ]
    env = dict(hosts.env(), ANSIBLE_LOG_PATH=str(log))
    return subprocess.run(
        [*cmd, *env_log, *extra], capture_output=True, text=True, env=env, timeout=600, check=False
    )


def changed_counts(stdout: str) -> dict[str, int]:
    """host -> changed=N from the PLAY RECAP."""
    return {
        m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", stdout, re.M)
    }


HTTP_PROBE = """
import json, sys, urllib.request, urllib.error
path, key = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
if key == "FILE":
    key = open("/etc/bwtune/server/api-key.env").read().strip().partition("=")[2]
req = urllib.request.Request("http://127.0.0.1:30000" + path)
if key:
    req.add_header("Authorization", "Bearer " + key)
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print(json.dumps({"status": r.status, "body": r.read().decode()}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "body": e.read().decode()}))
"""


def http_get(hosts: Any, host: str, path: str, key: str | None = None) -> dict[str, Any]:
    """GET on the host itself (the server binds 127.0.0.1); key "FILE" reads the host's key file there."""
    argv = ["python3", "-c", HTTP_PROBE, path, *([key] if key else [])]
    done = hosts.ssh(host, *argv)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))
