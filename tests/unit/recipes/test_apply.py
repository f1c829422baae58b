"""`bwtune recipe apply`: the recipe's config served on its hardware group's hosts through
promote's rollout (bwtune.app.promote_service), and its refusals. The playbook runs are
replaced by recorded events (no Ansible); tests/integration/cli/test_recipe_cli.py runs them."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bwtune import ansible_run, cli, exit_codes
from bwtune.app import promote_service, recipe_service
from bwtune.recipes import apply, recipe_file
from tests.unit.recipes.recipe_store import STACK
from tests.unit.recipes.test_check import host_facts
from tests.unit.recipes.test_check import host_facts as recipe_host_facts


class FakeAnsible:
    """The facts run answers with `facts`; the promote run promotes each host it is limited to,
    or fails `failing` (rolled back when `rolled_back`)."""

    def __init__(
        self,
        host_facts: dict[str, dict[str, Any]],
        simulated: bool,
        failing: str = "",
        built_facts: dict[str, Any] | None = None,
    ):
        self.facts, self.simulated, self.failing = host_facts, simulated, failing
        # What a host's facts are once recipe_apply.yml built its stack: the recipe's.
        self.built_facts = built_facts if built_facts is not None else recipe_host_facts()
        self.calls: list[dict[str, Any]] = []

    def load_inventory(self, path: str, limit: str | None = None) -> ansible_run.Inventory:
        hosts = {h: {"bwtune_simulated": self.simulated} for h in self.facts}
        return ansible_run.Inventory(Path(path), {h: v for h, v in hosts.items() if not limit or h == limit})

    def run_playbook(self, name: str, inventory: Any, extravars: Any, **kw: Any) -> ansible_run.PlaybookRun:
        self.calls.append({"playbook": name, "extravars": extravars, **kw})
        run = ansible_run.PlaybookRun(playbook=Path(name), private_data_dir=Path("/nonexistent"), ident="x")
        run.rc = 0
        limited = [h for h in inventory.hosts if not kw.get("limit") or h in kw["limit"].split(",")]
        if name == recipe_service.RECIPE_PLAYBOOK:
            for host in limited:
                task = (
                    recipe_service.SIMULATED_STACK_TASK if self.simulated else recipe_service.FINGERPRINT_TASK
                )
                python = f"/opt/bwtune/stacks/{extravars['recipe_fingerprint']}/bin/python"
                res = {"msg": {"fingerprint": extravars["recipe_fingerprint"], "python": python}}
                if not self.simulated:
                    res = {"fingerprint": "0f0f0f0f0f0f", "python": python}
                kw["on_event"](event("ok", host, "Write", "ansible.builtin.copy", {"changed": True}))
                kw["on_event"](event("ok", host, task, "ansible.builtin.debug", res))
                self.facts[host] = self.built_facts
            return run
        for host in limited:
            if name == promote_service.FACTS_PLAYBOOK:
                for key, value in self.facts[host].items():
                    res = {"ansible_facts": {key: value}}
                    run.ok.append(event("ok", host, "Gather", "bwtune.sglang.gpu_facts", res))
                continue
            kw["on_event"](event("ok", host, promote_service.RESOLVE_TASK, "x", {"changed_flags": []}))
            if host == self.failing:
                message = (
                    "promotion failed, no previous config to roll back to; removed what it made (3 files)"
                )
                kw["on_event"](event("failed", host, promote_service.STOP_TASK, "x", {"msg": message}))
                run.failures[host] = ansible_run.HostFailure(
                    host, "failed", promote_service.STOP_TASK, message
                )
                run.rc = 2
                break  # serial: 1, max_fail_percentage: 0: the rollout stops
            kw["on_event"](event("ok", host, promote_service.PROMOTED_TASK, "x", {}))
        return run


def event(kind: str, host: str, task: str, action: str, res: dict[str, Any]) -> ansible_run.RunnerEvent:
    return ansible_run.RunnerEvent(kind=kind, host=host, task=task, action=action, res=res, data={})


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeAnsible]:
    def install(*args: Any, **kwargs: Any) -> FakeAnsible:
        ansible = FakeAnsible(*args, **kwargs)
        monkeypatch.setattr(ansible_run, "load_inventory", ansible.load_inventory)
        monkeypatch.setattr(ansible_run, "run_playbook", ansible.run_playbook)
        return ansible

    return install


@pytest.fixture
def recipe_path(tmp_path: Path, db: sqlite3.Connection) -> Path:
    path = tmp_path / "recipe.json"
    path.write_text(recipe_file.dumps(recipe_file.build(db, "r20261130-demo")))
    return path


def edited(path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    data = json.loads(path.read_text())
    change(data)
    out = path.with_name("edited.json")
    out.write_text(json.dumps(data))
    return out


def apply_cli(path: Path, *extra: str) -> int:
    return cli.main(["recipe", "apply", str(path), "-i", "inventory.yml", *extra])


def test_the_recipes_argv_is_served_on_the_hosts_of_its_group_through_promotes_playbook(
    recipe_path: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    other = {**host_facts(), "bwtune_gpu": {"available": True, "sm": "sm100"}}
    ansible = fake({"a": host_facts(), "b": host_facts(), "c": other}, True)
    assert apply_cli(recipe_path, "--json") == exit_codes.OK
    out = json.loads(capsys.readouterr().out)
    assert {h: r["status"] for h, r in out["hosts"].items()} == {
        "a": "promoted",
        "b": "promoted",
        "c": "left out",
    }
    assert out["hosts"]["c"]["message"].startswith("another hardware group: GPU sm100")
    assert [c["playbook"] for c in ansible.calls] == ["facts.yml", "promote.yml"]
    promote = ansible.calls[1]
    assert promote["limit"] == "a,b" and "--check" not in promote["extra_args"]
    data = json.loads(recipe_path.read_text())
    assert promote["extravars"]["promote_config"] == {
        "args": data["launch"]["argv"],
        "config_id": data["measured"]["config_id"],
        "run_id": data["measured"]["run_id"],
    }
    assert out["provision"]["hosts"] == []


def test_a_secret_the_recipe_holds_redacted_is_never_passed_the_api_key_is_the_roles(
    recipe_path: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    def with_key(data: dict[str, Any]) -> None:
        data["launch"]["argv"] += ["--api-key", recipe_file.REDACTED, "--port", "30001"]

    ansible = fake({"a": host_facts()}, True)
    assert apply_cli(edited(recipe_path, with_key), "--json") == exit_codes.OK
    args = ansible.calls[1]["extravars"]["promote_config"]["args"]
    assert recipe_file.REDACTED not in args and "--api-key" not in args and "--port" not in args
    capsys.readouterr()

    def with_token(data: dict[str, Any]) -> None:
        data["launch"]["argv"] += [f"--hf-token={recipe_file.REDACTED}"]

    ansible = fake({"a": host_facts()}, True)
    assert apply_cli(edited(recipe_path, with_token)) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--hf-token is {recipe_file.REDACTED} in the recipe" in err[0], err
    assert ansible.calls == []


def test_a_simulated_recipe_is_refused_for_hosts_that_are_not_simulated_before_anything_runs(
    recipe_path: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    ansible = fake({"gpu-1": host_facts(), "gpu-2": host_facts()}, False)
    assert apply_cli(recipe_path) == exit_codes.BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == "" and ansible.calls == []
    assert captured.err.splitlines() == [
        f"bwtune recipe apply: {recipe_path}: the recipe's numbers are simulated (the stand-in's), and "
        "gpu-1, gpu-2 are not simulated: a simulated recipe is applied only on hosts with "
        "bwtune_simulated: true (they serve the stand-in; see inventory/local.yml)"
    ]


def test_no_host_of_the_recipes_group_is_one_line_exit_2_and_nothing_served(
    recipe_path: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    other = {**host_facts(), "bwtune_gpu": {"available": True, "sm": "sm100", "count": 8}}
    ansible = fake({"a": other}, True)
    assert apply_cli(recipe_path) == exit_codes.BAD_INPUT
    captured = capsys.readouterr()
    assert [c["playbook"] for c in ansible.calls] == ["facts.yml"]
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(
        f"bwtune recipe apply: no host of inventory inventory.yml is in the hardware group of {recipe_path} ("
    )
    assert line.endswith("nothing was applied. a: another hardware group: GPU sm100, the run's sm120")


PINNED = {
    "torch_version": STACK["torch"],
    "cuda_toolkit_version": "13.0",
    "torch_expected_cuda": "13.0",
    "sgl_kernel_sglang_commit": STACK["sglang_commit"],
    "sglang_flashinfer_version": STACK["flashinfer"],
    "sgl_kernel_require_targets": ["sm_120a"],
    "sgl_kernel_enable_sm100a": False,
    "sgl_kernel_enable_sm90a": False,
    "sgl_kernel_enable_fp4": True,
}


def test_check_says_a_host_whose_stack_differs_would_get_the_recipes_stack_then_its_config(
    recipe_path: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    older = host_facts(fingerprint="sha256:000000000000", torch__version="2.11.0+cu130")
    ansible = fake({"a": host_facts(), "b": older}, False)
    assert apply_cli(edited(recipe_path, real), "--check") == exit_codes.OK
    out = capsys.readouterr().out
    assert [c["playbook"] for c in ansible.calls] == ["facts.yml", "recipe_apply.yml", "promote.yml"]
    steps, promote = ansible.calls[1], ansible.calls[2]
    assert "--check" in steps["extra_args"] and "--check" in promote["extra_args"]
    # The pinned inputs go to provision.yml (a host that is not simulated) as its variables.
    assert {k: steps["extravars"][k] for k in PINNED} == PINNED
    assert steps["extravars"]["provision_hosts"] == ["b"] and steps["limit"] == "b"
    assert steps["extravars"]["recipe_simulated_hosts"] == []
    assert "b: not in the recipe's hardware group: another hardware group: stack sha256:000000000000" in out
    assert f"stack inputs that differ: torch 2.11.0+cu130 (recipe {STACK['torch']})" in out
    assert "stack: the recipe's already on a (nothing to build)" in out
    assert "b: stack 0f0f0f0f0f0f would be built with the recipe's pinned inputs (torch_version=" in out
    assert promote["limit"] == "a,b"


def real(data: dict[str, Any]) -> None:
    data["simulated"] = False


def test_apply_builds_the_recipes_stack_where_it_differs_checks_it_and_serves_from_it(
    recipe_path: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    older = host_facts(fingerprint="sha256:000000000000", flashinfer__version="0.6.0")
    ansible = fake({"a": older}, True)
    assert apply_cli(recipe_path, "--json") == exit_codes.OK
    out = json.loads(capsys.readouterr().out)
    assert [c["playbook"] for c in ansible.calls] == [
        "facts.yml",
        "recipe_apply.yml",
        "facts.yml",
        "promote.yml",
    ]
    steps, again, promote = ansible.calls[1:]
    assert (
        steps["extravars"]["recipe_simulated_hosts"] == ["a"] and steps["extravars"]["provision_hosts"] == []
    )
    assert steps["extravars"]["recipe_scratch"] is False
    assert {p["name"]: p["version"] for p in steps["extravars"]["recipe_packages"]} == {
        "torch": STACK["torch"], "flashinfer-python": STACK["flashinfer"], "sglang": STACK["sglang"],
    }  # fmt: skip
    python = f"/opt/bwtune/stacks/{steps['extravars']['recipe_fingerprint']}/bin/python"
    # The built stack's facts are read from its Python, and the server is started from it.
    assert json.loads(again["extra_args"][-1]) == {
        "recipe_stack_pythons": {"a": python},
        "bwtune_stack_python": "{{ recipe_stack_pythons[inventory_hostname] }}",
    }
    assert again["limit"] == "a"
    served = json.loads(promote["extra_args"][-1])
    assert served["recipe_stack_pythons"] == {"a": python} and "server_python" in served
    assert out["hosts"]["a"]["status"] == "promoted" and out["hosts"]["a"]["changed"] is True
    assert out["hosts"]["a"]["stack"]["simulated"] is True


def test_a_host_whose_built_stack_still_differs_is_failed_and_not_served(
    recipe_path: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    older = host_facts(fingerprint="sha256:000000000000", flashinfer__version="0.6.0")
    ansible = fake({"a": older}, True, built_facts=older)
    assert apply_cli(recipe_path) == exit_codes.HOST_FAILED
    captured = capsys.readouterr()
    assert [c["playbook"] for c in ansible.calls] == ["facts.yml", "recipe_apply.yml", "facts.yml"]
    (line,) = [x for x in captured.err.splitlines() if x.startswith("bwtune recipe apply: host a")]
    assert line == (
        "bwtune recipe apply: host a failed: its stack was built but still differs from the recipe's: "
        f"FlashInfer 0.6.0 (recipe {STACK['flashinfer']})"
    )


def test_a_first_host_that_fails_stops_the_rollout_and_the_exit_says_a_host_failed(
    recipe_path: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    fake({"a": host_facts(), "b": host_facts()}, True, failing="a")
    assert apply_cli(recipe_path) == exit_codes.HOST_FAILED
    captured = capsys.readouterr()
    assert "b: " not in captured.out  # never reached
    assert captured.err.splitlines() == [
        "bwtune recipe apply: host a failed: promotion failed, no previous config to roll back to; "
        "removed what it made (3 files)",
        "bwtune recipe apply: host b not reached",
    ]


def test_pinned_inputs_of_a_recipe_without_a_stack_are_none() -> None:
    assert apply.pinned_inputs({"stack": {"components": None, "recorded": False}}) == {}
    kernel = {"components": {"sgl_kernel_build": "sm_100a sm_120a; fp4 ops: none", "torch": "unknown"}}
    assert apply.pinned_inputs({"stack": kernel}) == {
        "sgl_kernel_require_targets": ["sm_100a", "sm_120a"],
        "sgl_kernel_enable_sm100a": True,
        "sgl_kernel_enable_sm90a": False,
        "sgl_kernel_enable_fp4": False,
    }


def test_a_host_with_another_stack_is_left_out_when_the_recipe_pins_no_input(
    recipe_path: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    def unpinned(data: dict[str, Any]) -> None:
        data["stack"]["components"] = {name: None for name in data["stack"]["components"]}

    older = host_facts(fingerprint="sha256:000000000000", flashinfer__version="0.6.0")
    ansible = fake({"a": older}, True)
    assert apply_cli(edited(recipe_path, unpinned)) == exit_codes.BAD_INPUT
    captured = capsys.readouterr()
    assert [c["playbook"] for c in ansible.calls] == ["facts.yml"]
    (line,) = captured.err.splitlines()
    assert "nothing was applied. a: another hardware group: stack sha256:000000000000" in line
