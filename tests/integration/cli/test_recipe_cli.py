"""`bwtune recipe export` from a demo-like stand-in run, `bwtune recipe check` and `bwtune
recipe verify` of it on the local inventory (inventory/local.yml, as `bwtune demo` uses it):
the host is of the recipe's hardware group; a recipe whose torch differs names it; the same
stand-in reproduces it; a stand-in whose decode steps take 25% longer is `slower by X%`.
`bwtune recipe apply` of it: --check writes nothing, apply serves it (and a first host that
cannot serve is undone), a simulated recipe for a real host and a recipe of another hardware
group are refused before anything is written."""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import re
import signal
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bwtune import exit_codes
from tests.integration.cli.conftest import LOCAL_INVENTORY, bwtune_argv, run, tiny_matrix

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _profile(tmp_path: Path, env: dict[str, str], name: str, step_factor: float) -> dict[str, str]:
    profile: dict[str, Any] = yaml.safe_load(Path(env["BWTUNE_STANDIN_PROFILE"]).read_text())
    steps = profile["decode"]["baseline"]["step_ms"]
    profile["decode"]["baseline"]["step_ms"] = {k: v * step_factor for k, v in steps.items()}
    path = tmp_path / f"{name}.yml"
    path.write_text(yaml.safe_dump(profile))
    return {**env, "BWTUNE_STANDIN_PROFILE": str(path)}


@pytest.fixture
def recipe(tmp_path: Path, sweep_env: dict[str, str]) -> Path:
    """A recipe exported from a one-config stand-in run on the local inventory."""
    matrix = tiny_matrix(tmp_path, ["flashinfer_cutlass"], num_prompts=8)
    node = tmp_path / "node"
    swept = run(
        bwtune_argv("sweep", "-i", str(LOCAL_INVENTORY), "-m", str(matrix), "--node-results-dir", str(node),
                    "--quiet", "--json"),
        sweep_env,
    )  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    run_id = json.loads(swept.stdout)["run_id"]
    path = tmp_path / "recipe.json"
    exported = run(bwtune_argv("recipe", "export", run_id, "-o", str(path)), sweep_env)
    assert exported.returncode == 0, exported.stderr
    return path


def _verify(
    recipe: Path, env: dict[str, str], tmp_path: Path, *extra: str
) -> tuple[int, dict[str, Any], str]:
    attestation = tmp_path / "attestation.md"
    done = run(
        bwtune_argv("recipe", "verify", str(recipe), "-i", str(LOCAL_INVENTORY), "--launches", "2",
                    "--node-results-dir", str(tmp_path / "node"), "--attestation", str(attestation),
                    "--quiet", "--json", *extra),
        env,
        timeout=600,
    )  # fmt: skip
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), attestation.read_text()


# The verdicts weigh the change against the launch-to-launch spread the run measures: on a
# machine loaded many times over the stand-in's spread grows until a 25% drop is (rightly)
# inconclusive. So it runs with the quiet tests, alone (docs/testing.md).
@pytest.mark.quiet
def test_a_recipe_from_a_stand_in_run_is_reproduced_and_a_slower_stand_in_is_slower(
    tmp_path: Path, sweep_env: dict[str, str], recipe: Path
) -> None:
    data = json.loads(recipe.read_text())
    assert data["simulated"] is True and data["stack"]["recorded"] is True
    assert data["hardware"]["model"] and data["results"]["launches"][0]["values"]
    config_id = data["measured"]["config_id"]

    code, outcome, attestation = _verify(recipe, sweep_env, tmp_path)
    assert (code, outcome["verdict"]) == (exit_codes.OK, "reproduced"), outcome
    assert outcome["config_id"] == config_id and len(outcome["candidate"]) == 2
    assert attestation.startswith("# Recipe verification: reproduced")
    assert "| recorded | 1 |" in attestation and "| verified | 2 |" in attestation
    assert "SIMULATED" in attestation

    slower = _profile(tmp_path, sweep_env, "slower", 1.25)
    code, outcome, attestation = _verify(recipe, slower, tmp_path)
    assert (code, outcome["verdict"]) == (exit_codes.REGRESSION, "slower"), outcome
    found = re.fullmatch(r"slower by (\d+\.\d)% \(p=[0-9.e-]+\)", outcome["line"])
    assert found and 10 < float(found.group(1)) < 30, outcome["line"]
    assert attestation.startswith(f"# Recipe verification: {outcome['line']}")

    # A recipe whose torch is not this host's: --apply-stack builds its stack (simulated, a
    # scratch one) and launches from it, and the same stand-in reproduces it there.
    other = _other_torch(recipe, tmp_path)
    stacks = json.dumps({"bwtune_stack_root": str(tmp_path / "stacks")})
    code, outcome, attestation = _verify(other, sweep_env, tmp_path, "--apply-stack", "-e", stacks)
    assert (code, outcome["verdict"]) == (exit_codes.OK, "reproduced"), outcome
    assert outcome["differ"] == [] and "built for this verification" in outcome["note"]
    assert "Stack inputs that differ" not in attestation


def test_check_on_the_local_inventory_gathers_facts_and_names_a_differing_input(
    tmp_path: Path, sweep_env: dict[str, str], recipe: Path
) -> None:
    argv = ["recipe", "check", str(recipe), "-i", str(LOCAL_INVENTORY)]
    done = run(bwtune_argv(*argv), sweep_env)
    assert done.returncode == exit_codes.OK, done.stdout + done.stderr
    assert "localhost: in the recipe's hardware group" in done.stdout
    assert "stack inputs: the recipe's" in done.stdout and "nothing was changed" in done.stdout

    data = json.loads(recipe.read_text())
    data["stack"]["components"]["torch"] = "2.99.0"
    data["hardware"]["stack_fingerprint"] = "0123456789ab"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    done = run(bwtune_argv("recipe", "check", str(other), "-i", str(LOCAL_INVENTORY), "--json"), sweep_env)
    assert done.returncode == exit_codes.NOT_VERIFIED, done.stderr
    (host,) = json.loads(done.stdout)["hosts"]
    assert host["host"] == "localhost" and not host["in_group"]
    assert [d["name"] for d in host["differ"]] == ["torch"] and host["differ"][0]["recipe"] == "2.99.0"
    assert any(line.startswith("need a stack with torch 2.99.0") for line in host["apply_would"])


# `bwtune recipe apply` on the local inventory. This machine has no systemd as PID 1 (like
# the demo's controller, tests/integration/cli/test_promote_local.py): a stand-in for
# systemctl (below) starts the unit's ExecStart as systemd would (its EnvironmentFile and
# WorkingDirectory; not its User or sandboxing), so the stand-in really serves what the role
# wrote. Without it, the unit's start fails and the first host's promotion is undone.
FAKE_SYSTEMCTL = r'''#!PYTHON
"""systemctl for one test: units in UNITS, their state in STATE (a pid file per unit)."""
import os, re, signal, subprocess, sys, time
from pathlib import Path

UNITS, STATE = Path(r"UNIT_DIR"), Path(r"STATE_DIR")


def pid_of(unit):
    try:
        pid = int((STATE / f"{unit}.pid").read_text())
        os.kill(pid, 0)
        if Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].startswith("Z"):
            return None
    except (OSError, ValueError, IndexError):
        return None
    return pid


def words(line):
    unquote = lambda m: chr(int(m.group(1), 16)) if m.group(1) else (m.group(2) or m.group(0)[0])
    return [re.sub(r"\\x([0-9a-fA-F]{2})|\\(.)|%%|\$\$", unquote, m.group(1))
            for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', line)]


def start(unit):
    conf, env_files = {}, []
    for line in (UNITS / unit).read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "EnvironmentFile":
            env_files.append(value.lstrip("-"))
        else:
            conf.setdefault(key, value)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    for path in env_files:
        for line in Path(path).read_text().splitlines():
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                env[key] = value
    with open(STATE / f"{unit}.log", "ab") as log:
        proc = subprocess.Popen(words(conf["ExecStart"]), cwd=conf.get("WorkingDirectory"), env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    (STATE / f"{unit}.pid").write_text(str(proc.pid))


def stop(unit):
    pid = pid_of(unit)
    if pid:
        os.killpg(pid, signal.SIGTERM)
        for _ in range(100):
            if pid_of(unit) is None:
                break
            time.sleep(0.1)


args = sys.argv[1:]
plain = [a for n, a in enumerate(args) if not a.startswith("-") and args[n - 1] != "--property"]
command, unit = (plain + ["", ""])[:2]
enabled = (STATE / f"{unit}.enabled").exists()
if command == "show":
    there, pid = (UNITS / unit).exists(), pid_of(unit)
    print(f"LoadState={'loaded' if there else 'not-found'}\nActiveState={'active' if pid else 'inactive'}")
    print(f"SubState={'running' if pid else 'dead'}\nUnitFileState={'enabled' if enabled else 'disabled'}")
    print(f"NRestarts=0\nExecMainStatus=0\nMainPID={pid or 0}")
elif command == "is-enabled":
    print("enabled" if enabled else "disabled")
    sys.exit(0 if enabled else 1)
elif command == "is-active":
    print("active" if pid_of(unit) else "inactive")
    sys.exit(0 if pid_of(unit) else 3)
elif command == "enable":
    (STATE / f"{unit}.enabled").touch()
elif command == "disable":
    (STATE / f"{unit}.enabled").unlink(missing_ok=True)
elif command in ("start", "restart"):
    stop(unit)
    start(unit)
elif command == "stop":
    stop(unit)
elif command == "list-unit-files":
    sys.exit(0 if (UNITS / unit).exists() else 1)
'''


def _exists(kind: str, name: str) -> bool:
    try:
        (pwd.getpwnam if kind == "user" else grp.getgrnam)(name)
    except KeyError:
        return False
    return True


@pytest.fixture
def node(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The server role's paths, unit, user and group for localhost, all the test's own (-e)."""
    name = "bwt-" + uuid.uuid4().hex[:8]
    root = tmp_path / "server-node"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    where = {
        "server_config_dir": str(root / "etc" / "bwtune" / "server"),
        "server_state_dir": str(root / "var" / "lib" / name),
        "server_cache_dir": str(root / "var" / "cache" / name),
        "server_unit_dir": str(root / "etc" / "systemd" / "system"),
        "server_unit_name": name,
        "server_user": name,
        "server_group": name,
        "server_port": port,
        "server_health_timeout_s": 60,
        "server_env": {"BWTUNE_STANDIN_STARTUP_SCALE": "0.01"},
    }
    for there in ("etc/systemd/system", "var/lib", "var/cache"):
        (root / there).mkdir(parents=True)
    variables = tmp_path / "server-vars.yml"
    variables.write_text(yaml.safe_dump(where))
    state = tmp_path / "systemd-state"
    state.mkdir()
    yield {"vars": variables, "root": root, "name": name, "port": port, "state": state, **where}
    pid = state / f"{name}.service.pid"
    if pid.exists():  # the stand-in the fake systemctl started for this test
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int(pid.read_text()), signal.SIGKILL)
    for tool, kind in (("userdel", "user"), ("groupdel", "group")):
        if _exists(kind, name):
            subprocess.run([tool, name], check=False)


def _made(node: dict[str, Any]) -> list[str]:
    """What the role left: every path under the root (but what was there), the user, the group."""
    present = {"etc", "etc/systemd", "etc/systemd/system", "var", "var/lib", "var/cache"}
    found = [str(p.relative_to(node["root"])) for p in sorted(node["root"].rglob("*"))]
    return [p for p in found if p not in present] + [k for k in ("user", "group") if _exists(k, node["name"])]


def _apply(
    recipe: Path, node: dict[str, Any], env: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    argv = ["recipe", "apply", str(recipe), "-i", str(LOCAL_INVENTORY), "-e", f"@{node['vars']}", *extra]
    return run(bwtune_argv(*argv), env, timeout=600)


def _with_systemctl(env: dict[str, str], node: dict[str, Any], tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    script = bin_dir / "systemctl"
    text = FAKE_SYSTEMCTL.replace("PYTHON", sys.executable).replace("UNIT_DIR", node["server_unit_dir"])
    script.write_text(text.replace("STATE_DIR", str(node["state"])))
    script.chmod(0o755)
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}


def test_apply_check_says_what_would_change_and_writes_nothing(
    sweep_env: dict[str, str], recipe: Path, node: dict[str, Any]
) -> None:
    done = _apply(recipe, node, sweep_env, "--check")
    assert done.returncode == exit_codes.OK, done.stdout + done.stderr
    config_id = json.loads(recipe.read_text())["measured"]["config_id"]
    assert f"checking what applying would change for {recipe}: config {config_id}" in done.stdout
    assert "localhost: in the recipe's hardware group" in done.stdout
    assert "stack inputs: the recipe's" in done.stdout
    unit = f"{node['server_unit_dir']}/{node['name']}.service"
    (would,) = [line for line in done.stdout.splitlines() if line.startswith("localhost: would change --")]
    assert "--moe-runner-backend unset -> flashinfer_cutlass" in would and "--tp-size unset -> 8" in would
    assert f"  unit {unit}: ExecStart=" in done.stdout and '"-m" "bwtune.standin"' in done.stdout
    assert _made(node) == []

    data = json.loads(_apply(recipe, node, sweep_env, "--check", "--json").stdout)
    assert data["check"] is True and data["hosts"]["localhost"]["status"] == "would change"
    assert unit in data["hosts"]["localhost"]["would"]["writes"]
    assert _made(node) == []


def test_apply_serves_the_recipes_config_and_a_first_host_that_fails_is_undone(
    tmp_path: Path, sweep_env: dict[str, str], recipe: Path, node: dict[str, Any]
) -> None:
    # No systemd: the unit cannot start, so the first (and only) host's promotion is undone.
    failed = _apply(recipe, node, sweep_env)
    assert failed.returncode == exit_codes.HOST_FAILED, failed.stdout + failed.stderr
    (line,) = [x for x in failed.stderr.splitlines() if x.startswith("bwtune recipe apply: host localhost")]
    assert "failed: promotion failed, no previous config to roll back to; removed what it made (" in line
    assert _made(node) == []

    done = _apply(recipe, node, _with_systemctl(sweep_env, node, tmp_path))
    assert done.returncode == exit_codes.OK, (
        done.stdout + done.stderr + (node["state"] / f"{node['name']}.service.log").read_text()
    )
    assert "localhost: serves the recipe's config, healthy and answering correctly" in done.stdout
    assert "share it as a recipe" not in done.stdout  # the export line is promote's
    # The API key is the server role's (generated on the host), never the recipe's.
    env_file = Path(node["server_config_dir"], "api-key.env").read_text()
    key = env_file.strip().partition("=")[2]
    assert len(key) >= 16 and key not in recipe.read_text()
    ask = urllib.request.Request(
        f"http://127.0.0.1:{node['port']}/get_server_info", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(ask, timeout=30) as answer:
        info = json.load(answer)
    data = json.loads(recipe.read_text())
    assert info["simulated"] is True
    assert info["moe_runner_backend"] == data["launch"]["flags"]["moe-runner-backend"] == "flashinfer_cutlass"
    assert info["tp_size"] == data["launch"]["flags"]["tp-size"]
    assert info["port"] == node["port"]
    served = json.loads(Path(node["server_config_dir"], "config.json").read_text())
    assert (served["config_id"], served["run_id"]) == (
        data["measured"]["config_id"],
        data["measured"]["run_id"],
    )


def test_apply_refuses_a_simulated_recipe_for_real_hosts_and_a_recipe_of_another_group(
    tmp_path: Path, sweep_env: dict[str, str], recipe: Path, node: dict[str, Any]
) -> None:
    real = tmp_path / "real.yml"
    inventory = yaml.safe_load(LOCAL_INVENTORY.read_text())
    inventory["all"]["vars"]["bwtune_simulated"] = False
    real.write_text(yaml.safe_dump(inventory))
    argv = ["recipe", "apply", str(recipe), "-i", str(real), "-e", f"@{node['vars']}"]
    done = run(bwtune_argv(*argv), sweep_env)
    assert done.returncode == exit_codes.BAD_INPUT and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"bwtune recipe apply: {recipe}: the recipe's numbers are simulated (the stand-in's), and "
        "localhost is not simulated: a simulated recipe is applied only on hosts with "
        "bwtune_simulated: true (they serve the stand-in; see inventory/local.yml)"
    ]

    data = json.loads(recipe.read_text())
    data["hardware"]["gpu"] = data["hardware"]["sm"] = "sm100"
    other = tmp_path / "sm100.json"
    other.write_text(json.dumps(data))
    done = _apply(other, node, sweep_env)
    assert done.returncode == exit_codes.BAD_INPUT and done.stdout == "", done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        f"bwtune recipe apply: no host of inventory {LOCAL_INVENTORY} is in the hardware group"
    )
    assert line.endswith("nothing was applied. localhost: another hardware group: GPU sm120, the run's sm100")
    assert _made(node) == []


# The recipe's stack on the local inventory (simulated: the stand-in's Python with the
# recipe's pinned inputs as package metadata; nothing is built). The recipe is the stand-in
# run's with another torch pinned, so the host's stack differs in that one input.
def _other_torch(recipe: Path, tmp_path: Path) -> Path:
    data = json.loads(recipe.read_text())
    data["stack"]["components"]["torch"] = "2.99.0"
    data["hardware"]["stack_fingerprint"] = "0123456789ab"
    other = tmp_path / "torch-2.99.json"
    other.write_text(json.dumps(data))
    return other


def test_apply_check_with_a_differing_stack_input_says_what_would_be_built_and_changes_nothing(
    tmp_path: Path, sweep_env: dict[str, str], recipe: Path, node: dict[str, Any]
) -> None:
    stacks = tmp_path / "stacks"
    other = _other_torch(recipe, tmp_path)
    done = _apply(other, node, sweep_env, "--check", "-e", json.dumps({"bwtune_stack_root": str(stacks)}))
    assert done.returncode == exit_codes.OK, done.stdout + done.stderr
    assert "stack inputs that differ: torch none (recipe 2.99.0)" in done.stdout
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("localhost: simulated stack ")]
    assert line.endswith("would be built with the recipe's pinned inputs (torch_version=2.99.0)"), line
    assert "localhost: would change --" in done.stdout
    assert not stacks.exists() and _made(node) == []


def test_apply_builds_the_recipes_stack_serves_from_it_and_a_second_apply_changes_nothing(
    tmp_path: Path, sweep_env: dict[str, str], recipe: Path, node: dict[str, Any]
) -> None:
    stacks = tmp_path / "stacks"
    other = _other_torch(recipe, tmp_path)
    env = _with_systemctl(sweep_env, node, tmp_path)
    root = ["-e", json.dumps({"bwtune_stack_root": str(stacks)})]
    done = _apply(other, node, env, *root)
    log = node["state"] / f"{node['name']}.service.log"
    assert done.returncode == exit_codes.OK, (
        done.stdout + done.stderr + (log.read_text() if log.exists() else "")
    )
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("localhost: simulated stack ")]
    fingerprint = line.split()[3]
    assert line.endswith(" built with the recipe's pinned inputs (torch_version=2.99.0)"), line
    assert os.readlink(stacks / "current") == fingerprint
    manifest = json.loads((stacks / fingerprint / "bwtune-stack.json").read_text())
    assert manifest == {"fingerprint": fingerprint, "inputs": {"torch_version": "2.99.0"}, "simulated": True}
    assert "localhost: serves the recipe's config, healthy and answering correctly" in done.stdout
    # The server runs from the built stack's Python (apply read that stack's facts before: torch
    # 2.99.0, or the host would have failed).
    unit = Path(node["server_unit_dir"], f"{node['name']}.service").read_text()
    assert f'"{stacks / fingerprint / "bin" / "python"}" "-m" "bwtune.standin"' in unit

    again = _apply(other, node, env, *root)
    assert again.returncode == exit_codes.OK, again.stdout + again.stderr
    assert f"localhost: simulated stack {fingerprint}: in place, nothing to build" in again.stdout
    assert "localhost: no change: serves the recipe's config already" in again.stdout
    assert "nothing changed: localhost had the recipe's stack, checkpoint and config already" in again.stdout


def test_verify_says_the_differing_input_and_with_apply_stack_launches_from_a_scratch_stack(
    tmp_path: Path, sweep_env: dict[str, str], recipe: Path
) -> None:
    """The verdict itself is the quiet test's (above): here, what each way says and builds."""
    stacks = tmp_path / "stacks"
    other = _other_torch(recipe, tmp_path)
    root = json.dumps({"bwtune_stack_root": str(stacks)})
    argv = ["recipe", "verify", str(other), "-i", str(LOCAL_INVENTORY), "--launches", "1",
            "--node-results-dir", str(tmp_path / "node"), "-e", root]  # fmt: skip

    without = run(bwtune_argv(*argv), sweep_env, timeout=600)
    differ = "measured under a different stack: stack inputs that differ from the recipe's: torch none"
    assert f"{differ} (recipe 2.99.0)" in without.stdout, without.stdout + without.stderr
    assert "--apply-stack builds the recipe's stack" in without.stdout
    assert not stacks.exists()

    done = run(bwtune_argv(*argv, "--apply-stack"), sweep_env, timeout=600)
    out = done.stdout + done.stderr
    said = "localhost: stack inputs that differ: torch none (recipe 2.99.0); building the recipe's stack"
    assert said in done.stderr, out
    assert "measured under a different stack" not in done.stdout, out
    (built,) = list(stacks.iterdir())
    assert not (stacks / "current").exists()  # a scratch stack never becomes current
    assert f"scratch stack: localhost: {built / 'bin' / 'python'}" in done.stdout, out
    assert [x for x in done.stdout.splitlines() if x.startswith(f"{other}: ")], out
