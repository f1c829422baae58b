"""`bwtune promote` rolls a config out to the hosts of its hardware group only.

The group is what the run recorded (the result's `gpu` and `stack_fingerprint`); a host is
in it when its facts now give the same two. The command's wiring is checked with the
playbook runs replaced by recorded events (no Ansible); the facts playbook itself runs in
tests/integration/serving/test_promote_real_facts.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.bwtune.sglang.plugins.module_utils._contracts import results_contract as contract
from bwtune import ansible_run, cli, exit_codes, results_db
from bwtune.analysis.hardware_group import HardwareGroup, select, why_not_in
from bwtune.commands import promote

RUN = "promote-group-1"
FP = "0123456789ab"
GROUP = HardwareGroup(sm="sm120", stack_fingerprint=FP)


def facts(sm: str | None = "sm120", fingerprint: str | None = FP, **gpu: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"bwtune_gpu": {"available": True, "sm": sm, "sms": [sm] if sm else [], **gpu}}
    if fingerprint is not None:
        found["bwtune_stack"] = {"fingerprint": fingerprint}
    return found


NO_SMI = {"bwtune_gpu": {"available": False, "reason": "nvidia-smi-missing", "sm": None}}


def test_a_host_with_the_runs_gpu_and_stack_is_in_the_group() -> None:
    assert why_not_in(GROUP, facts()) is None
    assert HardwareGroup.of_facts(facts()) == GROUP


@pytest.mark.parametrize(
    ("host_facts", "reason"),
    [
        (facts(fingerprint="ffffffffffff"), f"another hardware group: stack ffffffffffff, the run's {FP}"),
        (facts(sm="sm100"), "another hardware group: GPU sm100, the run's sm120"),
        (
            facts(sm="sm90", fingerprint="ffffffffffff"),
            f"another hardware group: GPU sm90, the run's sm120; stack ffffffffffff, the run's {FP}",
        ),
        (NO_SMI, "its GPUs are unknown (nvidia-smi-missing)"),
        ({}, "its GPUs are unknown (no GPU facts)"),
        (facts(sm="mixed", sms=["sm100", "sm120"]), "its GPUs are of several kinds (sm100, sm120)"),
        (facts(sm=None), "its GPU model is unknown"),
        (facts(fingerprint=None), "its stack is unknown (no stack Python at bwtune_stack_python)"),
    ],
    ids=["other-stack", "other-gpu", "both", "no-nvidia-smi", "no-facts", "mixed", "unknown-sm", "no-stack"],
)
def test_a_host_of_another_or_an_unknown_group_is_left_out_with_the_reason(
    host_facts: dict[str, Any], reason: str
) -> None:
    assert why_not_in(GROUP, host_facts) == reason


def test_selection_keeps_the_inventory_order_and_says_why_for_every_other_host() -> None:
    found = {"a": facts(), "b": facts(fingerprint="ffffffffffff"), "d": facts(), "e": NO_SMI}
    chosen = select(GROUP, ["d", "a", "b", "c", "e"], found, {"c": "host c is unreachable: timed out"})
    assert chosen.hosts == ["d", "a"]
    assert list(chosen.left_out) == ["b", "c", "e"]
    assert chosen.left_out["c"] == "its facts could not be gathered (host c is unreachable: timed out)"
    assert chosen.unknown == ["c"]


def line(config_id: str, throughput: float, **where: Any) -> dict[str, Any]:
    block = {"n": 1, "values": {"output_throughput": throughput}}
    return contract.make_line(
        run_id=RUN, host="sweep-node", config_id=config_id, status="ok", flags={"tp-size": 8},
        argv=["--model-path", "/m", "--tp-size", "8"], metrics={"chat": block}, **where,
    )  # fmt: skip


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "results.db"
    conn = results_db.connect(path)
    results_db.record_run(
        conn, RUN, objective={"workload": "chat", "metric": "output_throughput", "goal": "max"}
    )
    results_db.import_results(
        conn,
        [
            line("cgroup00001", 80.0, gpu="sm120", stack_fingerprint=FP),
            line("cnogroup002", 50.0),  # an older line: no fingerprint recorded
        ],
    )
    conn.close()
    return path


class FakeAnsible:
    """runner.run_playbook and load_inventory replaced: the facts run answers with `facts`,
    the promote run promotes every host it is limited to."""

    def __init__(self, hosts: list[str], host_facts: dict[str, dict[str, Any]], unreachable: tuple = ()):
        self.hosts, self.facts, self.unreachable = hosts, host_facts, unreachable
        self.calls: list[dict[str, Any]] = []

    def load_inventory(self, path: str, limit: str | None = None) -> ansible_run.Inventory:
        return ansible_run.Inventory(
            Path(path), {h: {} for h in self.hosts if not limit or h in limit.split(",")}
        )

    def run_playbook(self, name: str, inventory: Any, extravars: Any, **kw: Any) -> ansible_run.PlaybookRun:
        self.calls.append({"playbook": name, "extravars": extravars, "limit": kw.get("limit")})
        run = ansible_run.PlaybookRun(playbook=Path(name), private_data_dir=Path("/nonexistent"), ident="x")
        limited = [h for h in inventory.hosts if not kw.get("limit") or h in kw["limit"].split(",")]
        run.rc = 0
        for host in limited:
            if name == promote.FACTS_PLAYBOOK:
                if host in self.unreachable:
                    run.failures[host] = ansible_run.HostFailure(
                        host, "unreachable", "Gather GPU facts", "timed out"
                    )
                    continue
                for key, value in self.facts.get(host, {}).items():
                    run.ok.append(
                        event(host, "Gather", "bwtune.sglang.gpu_facts", {"ansible_facts": {key: value}})
                    )
            else:
                for task, res in ((promote.RESOLVE_TASK, {"changed_flags": []}), (promote.PROMOTED_TASK, {})):
                    ev = event(host, task, "ansible.builtin.debug", res)
                    run.ok.append(ev)
                    kw["on_event"](ev)
        return run


def event(host: str, task: str, action: str, res: dict[str, Any]) -> ansible_run.RunnerEvent:
    return ansible_run.RunnerEvent(kind="ok", host=host, task=task, action=action, res=res, data={})


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., FakeAnsible]]:
    def install(*args: Any, **kwargs: Any) -> FakeAnsible:
        ansible = FakeAnsible(*args, **kwargs)
        monkeypatch.setattr(ansible_run, "load_inventory", ansible.load_inventory)
        monkeypatch.setattr(ansible_run, "run_playbook", ansible.run_playbook)
        return ansible

    yield install


def promote_cli(db: Path, *extra: str) -> int:
    return cli.main(["promote", RUN, "-i", "inventory.yml", "--db", str(db), "--json", *extra])


def test_only_the_groups_hosts_are_promoted_the_others_left_out_with_why(
    db: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    ansible = fake(["a", "b", "c"], {"a": facts(), "b": facts(fingerprint="ffffffffffff"), "c": facts()})
    assert promote_cli(db) == exit_codes.OK
    out = json.loads(capsys.readouterr().out)
    # The run kept no GPU facts of sweep-node: count, model and interconnect are not known.
    assert out["hardware_group"] == {
        "gpu": "sm120",
        "gpu_model": None,
        "gpu_count": None,
        "interconnect": None,
        "stack_fingerprint": FP,
    }
    assert {h: r["status"] for h, r in out["hosts"].items()} == {
        "a": "promoted",
        "b": "left out",
        "c": "promoted",
    }
    assert out["hosts"]["b"]["message"] == f"another hardware group: stack ffffffffffff, the run's {FP}"
    assert [c["playbook"] for c in ansible.calls] == ["facts.yml", "promote.yml"]
    assert ansible.calls[1]["limit"] == "a,c"
    assert ansible.calls[1]["extravars"]["promote_config"]["config_id"] == "cgroup00001"


def test_a_4_gpu_result_goes_to_the_4_gpu_host_only_not_to_an_8_gpu_host_of_the_same_sm(
    db: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    """The same SM and stack on 8 GPUs is another group: the 4-GPU numbers do not hold there
    (an SM + fingerprint comparison alone would promote to both)."""
    conn = results_db.connect(db)
    four = {"available": True, "message": "4 x NVIDIA RTX PRO 6000", "count": 4, "sm": "sm120"}
    results_db.record_host_facts(
        conn, RUN, "sweep-node", gpu_facts=results_db.gpu_facts_summary({**four, "interconnect": "pcie"})
    )
    conn.close()
    eight = facts(count=8, message="8 x NVIDIA RTX PRO 6000", interconnect="pcie")
    ansible = fake(["big", "small"], {"big": eight, "small": facts(**{**four, "interconnect": "pcie"})})
    assert promote_cli(db) == exit_codes.OK
    out = json.loads(capsys.readouterr().out)
    assert out["hardware_group"]["gpu_count"] == 4
    assert out["hardware_group"]["gpu_model"] == "NVIDIA RTX PRO 6000"
    assert {h: r["status"] for h, r in out["hosts"].items()} == {"big": "left out", "small": "promoted"}
    assert out["hosts"]["big"]["message"] == "another hardware group: GPUs 8, the run's 4"
    assert ansible.calls[1]["limit"] == "small"


def test_a_host_with_other_interconnect_or_model_is_another_group() -> None:
    group = HardwareGroup(
        gpu_model="NVIDIA B200", gpu_count=8, sm="sm100", interconnect="nvlink", stack_fingerprint=FP
    )
    same = facts(sm="sm100", count=8, message="8 x NVIDIA B200", interconnect="nvlink")
    assert why_not_in(group, same) is None
    pcie = facts(sm="sm100", count=8, message="8 x NVIDIA B200", interconnect="pcie")
    assert why_not_in(group, pcie) == "another hardware group: interconnect pcie, the run's nvlink"
    other = facts(sm="sm100", count=8, message="8 x NVIDIA B300", interconnect="nvlink")
    assert why_not_in(group, other) == "another hardware group: GPU model NVIDIA B300, the run's NVIDIA B200"


def test_limit_narrows_before_the_group_is_looked_for(
    db: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    ansible = fake(["a", "b", "c"], {"a": facts(), "b": facts(), "c": facts()})
    assert promote_cli(db, "--limit", "b") == exit_codes.OK
    assert list(json.loads(capsys.readouterr().out)["hosts"]) == ["b"]
    assert ansible.calls[1]["limit"] == "b"


def test_no_host_in_the_group_is_one_line_exit_2_and_nothing_promoted(
    db: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    ansible = fake(["a", "b"], {"a": facts(sm="sm100"), "b": NO_SMI})
    assert promote_cli(db) == exit_codes.BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"bwtune: no host of inventory inventory.yml is in the hardware group of config cgroup00001 of run "
        f"{RUN} (sm120, stack {FP}); nothing was promoted. a: another hardware group: GPU sm100, the run's "
        "sm120; b: its GPUs are unknown (nvidia-smi-missing)"
    ]
    assert [c["playbook"] for c in ansible.calls] == ["facts.yml"]


def test_a_host_whose_facts_failed_is_left_out_and_the_exit_says_a_host_failed(
    db: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    fake(["a", "b"], {"a": facts(), "b": facts()}, unreachable=("b",))
    assert promote_cli(db) == exit_codes.HOST_FAILED
    hosts = json.loads(capsys.readouterr().out)["hosts"]
    assert hosts["a"]["status"] == "promoted"
    assert hosts["b"]["status"] == "left out"
    assert "its facts could not be gathered (host b is unreachable" in hosts["b"]["message"]


def test_a_config_whose_run_recorded_no_group_is_refused_before_any_playbook(
    db: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    ansible = fake(["a"], {"a": facts()})
    assert promote_cli(db, "--config", "cnogroup002") == exit_codes.BAD_INPUT
    assert capsys.readouterr().err.strip() == (
        f"bwtune: run {RUN}: config cnogroup002 (measured on sweep-node) records no GPU and no stack "
        "fingerprint: cannot tell which hosts it holds for"
    )
    assert ansible.calls == []


def test_a_simulated_result_is_refused_for_a_host_that_is_not_simulated_before_anything_runs(
    tmp_path: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20 #2: the stand-in's numbers never become a real server's config."""
    path = tmp_path / "sim.db"
    conn = results_db.connect(path)
    results_db.record_run(
        conn, RUN, objective={"workload": "chat", "metric": "output_throughput", "goal": "max"}
    )
    results_db.import_results(
        conn, [line("csimulated1", 80.0, gpu="sm120", stack_fingerprint=FP, simulated=True)]
    )
    conn.close()
    ansible = fake(["gpu-node", "gpu-node-2"], {"gpu-node": facts(), "gpu-node-2": facts()})
    assert promote_cli(path) == exit_codes.BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == "" and ansible.calls == []
    assert captured.err.splitlines() == [
        f"bwtune: run {RUN}: config csimulated1 has simulated numbers (the stand-in's), and gpu-node, "
        "gpu-node-2 are not simulated: a simulated result is never promoted to a real server. For a demo, "
        "promote it to an inventory host with bwtune_simulated: true (it serves the stand-in; see "
        "inventory/local.yml)"
    ]


def test_a_successful_promotion_offers_the_recipe_export_and_check_does_not(
    db: Path, fake: Callable[..., FakeAnsible], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27: promote offers `bwtune recipe export` of the config it put into service."""
    fake(["a"], {"a": facts()})
    assert cli.main(["promote", RUN, "-i", "inventory.yml", "--db", str(db)]) == exit_codes.OK
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == (
        f"share it as a recipe: bwtune recipe export {RUN} --config cgroup00001 --db {db} "
        "-o cgroup00001.recipe.json"
    )
    assert cli.main(["promote", RUN, "-i", "inventory.yml", "--db", str(db), "--check"]) == exit_codes.OK
    assert "recipe export" not in capsys.readouterr().out
