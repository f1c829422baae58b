"""A normal install works: the wheel (built the way `python -m build` builds it, sdist then
wheel) and the galaxy tarball, each installed into a fresh venv, away from the repo, and used.

The collection each ships is compared with the repo's own files, so a folder that appears
later (roles/, a new plugin type) is checked without touching this test.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from ansible_collections.bwtune.sglang.plugins.module_utils._checkpoint.checkpoint_info import gather

from .fresh_env import REPO, isolated_env, make_venv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

COLLECTION = "ansible_collections/bwtune/sglang"
DEMO_MATRIX = "examples/demo.yml"
EXAMPLE_MODEL = "examples/models/qwen35-397b-a17b-nvfp4"
# What only a developer needs: none of it may be in the galaxy tarball (galaxy.yml build_ignore).
DEV_ONLY = [".ansible-lint", ".gitignore", ".venv", "build", "dist", "src", "tests", "pyproject.toml",
            "Makefile", ".ansible", ".git", ".ci", "benchmarks", "scripts", "hatch_build.py",
            "molecule"]  # fmt: skip
# What the collection is: each must be in both the tarball and the wheel.
REQUIRED = ["galaxy.yml", "meta/runtime.yml", "plugins/modules/sweep.py", "playbooks/sweep.yml", DEMO_MATRIX]


def run(
    argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, (
        f"{argv} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def documented_roles(tree: Path) -> set[str]:
    """Roles that document their arguments (what ansible-doc lists)."""
    return {p.parents[1].name for p in tree.glob("roles/*/meta/argument_specs.y*ml")}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("packaging")


@pytest.fixture(scope="module")
def source(work: Path) -> Path:
    """What a fresh checkout holds (tracked files and new ones git does not ignore), copied
    once: both artifacts are built from the same files, whatever else changes meanwhile."""
    tree = work / "checkout"
    tree.mkdir()
    listed = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO).stdout
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file():  # a listed file deleted meanwhile is not part of the checkout
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tree / rel)
    return tree


@pytest.fixture(scope="module")
def wheel(source: Path, work: Path) -> Path:
    """sdist from the checkout, then the wheel from the sdist: `python -m build`'s two steps."""
    out = work / "dist"
    run([sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(out)], cwd=source)
    (sdist,) = out.glob("bwtune-*.tar.gz")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
         str(sdist)])  # fmt: skip
    (whl,) = out.glob("bwtune-*.whl")
    return whl


@pytest.fixture(scope="module")
def tarball(source: Path, work: Path) -> Path:
    out = work / "galaxy"
    galaxy = str(Path(sys.executable).with_name("ansible-galaxy"))
    run([galaxy, "collection", "build", "--output-path", str(out), str(source)], cwd=work)
    (tar,) = out.glob("bwtune-sglang-*.tar.gz")
    return tar


def tarball_files(tar: Path) -> set[str]:
    with tarfile.open(tar) as t:
        return {m.name for m in t.getmembers() if m.isfile()}


def test_tarball_ships_the_collection_and_nothing_of_the_dev_tree(tarball: Path, source: Path) -> None:
    files = tarball_files(tarball)
    tops = {name.split("/")[0] for name in files}
    assert not tops & set(DEV_ONLY), sorted(tops & set(DEV_ONLY))
    parts = {part for name in files for part in name.split("/")}
    assert not parts & {"molecule", "__pycache__", ".plugin-cache.yaml"}, sorted(parts)
    assert {"MANIFEST.json", "FILES.json", *REQUIRED[1:]} <= files
    shipped_roles = {name.split("/")[1] for name in files if name.startswith("roles/")}
    assert shipped_roles == {p.name for p in source.glob("roles/*") if p.is_dir()}


def test_wheel_ships_the_package_and_the_same_collection_as_the_tarball(wheel: Path, tarball: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    in_wheel = {n.removeprefix(f"{COLLECTION}/") for n in names if n.startswith(f"{COLLECTION}/")}
    assert {"bwtune/cli.py", "bwtune/standin/__main__.py"} <= {n for n in names if n.startswith("bwtune/")}
    assert set(REQUIRED) <= in_wheel
    # One rule for both: the tarball's files are the wheel's, less galaxy.yml (-> MANIFEST.json).
    assert in_wheel - {"galaxy.yml"} == tarball_files(tarball) - {"MANIFEST.json", "FILES.json"}


@pytest.fixture(scope="module")
def wheel_env(wheel: Path, work: Path) -> tuple[Path, dict[str, str]]:
    bin_dir = make_venv(work / "wheel-venv", [str(wheel)], work)
    return bin_dir, isolated_env(bin_dir, work / "wheel-home")


def dev_plan(matrix: Path) -> str:
    return run([str(Path(sys.executable).with_name("bwtune")), "plan", str(matrix)]).stdout


def sweep_doc(ansible_doc: str, env: dict[str, str], cwd: Path) -> dict[str, object]:
    out = run([ansible_doc, "--json", "bwtune.sglang.sweep"], env=env, cwd=cwd).stdout
    doc: dict[str, object] = json.loads(out)["bwtune.sglang.sweep"]["doc"]
    return doc


def shipped_sweep_doc(tree: Path) -> dict[str, object]:
    module = (tree / "plugins" / "modules" / "sweep.py").read_text()
    return yaml.safe_load(module.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])


def listed_roles(ansible_doc: str, env: dict[str, str], cwd: Path) -> set[str]:
    out = run([ansible_doc, "-t", "role", "--list", "--json", "bwtune.sglang"], env=env, cwd=cwd).stdout
    return {name.removeprefix("bwtune.sglang.") for name in json.loads(out)}


def test_installed_wheel_plans_shows_demo_help_and_documents_its_modules_and_roles(
    wheel_env: tuple[Path, dict[str, str]], source: Path, work: Path
) -> None:
    bin_dir, env = wheel_env
    # The venv's own copy is what runs, not the repo.
    where_code = "import bwtune, ansible_collections.bwtune.sglang as c; print(bwtune.__file__, *c.__path__)"
    where = run([str(bin_dir / "python"), "-c", where_code], env=env, cwd=work).stdout.split()
    assert all(p.startswith(str(work / "wheel-venv")) for p in where), where
    collection = Path(where[1])

    # `bwtune plan` on the matrix the wheel ships (model path and config ids depend on where
    # it lies) plans what the dev tree's code plans for that same file.
    matrix = collection / DEMO_MATRIX
    plan = run([str(bin_dir / "bwtune"), "plan", str(matrix)], env=env, cwd=work).stdout
    assert plan == dev_plan(matrix)

    help_text = run([str(bin_dir / "bwtune"), "demo", "--help"], env=env, cwd=work).stdout
    assert help_text.startswith("usage: bwtune demo"), help_text

    doc = sweep_doc(str(bin_dir / "ansible-doc"), env, work)
    expected = shipped_sweep_doc(source)
    assert doc["short_description"] == expected["short_description"]
    assert set(doc["options"]) == set(expected["options"])  # type: ignore[call-overload]
    assert listed_roles(str(bin_dir / "ansible-doc"), env, work) == documented_roles(source)


@pytest.fixture(scope="module")
def tarball_env(tarball: Path, work: Path) -> tuple[Path, dict[str, str], Path]:
    """ansible-core alone (the dev venv's version), the tarball installed with ansible-galaxy."""
    bin_dir = make_venv(work / "tarball-venv", [f"ansible-core=={version('ansible-core')}"], work)
    collections = work / "collections"
    env = isolated_env(bin_dir, work / "tarball-home", ANSIBLE_COLLECTIONS_PATH=str(collections))
    run([str(bin_dir / "ansible-galaxy"), "collection", "install", "-p", str(collections), str(tarball)],
        env=env, cwd=work)  # fmt: skip
    return bin_dir, env, collections / COLLECTION


def test_installed_tarball_documents_its_modules_and_roles_and_runs_a_module(
    tarball_env: tuple[Path, dict[str, str], Path], source: Path, work: Path
) -> None:
    bin_dir, env, collection = tarball_env
    ansible_doc = str(bin_dir / "ansible-doc")
    doc = sweep_doc(ansible_doc, env, work)
    assert doc["short_description"] == shipped_sweep_doc(source)["short_description"]
    assert listed_roles(ansible_doc, env, work) == documented_roles(source)

    # A module runs from the installed collection (its module_utils packed from there).
    model = collection / EXAMPLE_MODEL
    adhoc = [str(bin_dir / "ansible"), "localhost", "-i", "localhost,", "-c", "local", "-o",
             "-e", f"ansible_python_interpreter={bin_dir / 'python'}",
             "-m", "bwtune.sglang.checkpoint_facts", "-a", f"path={model}"]  # fmt: skip
    out = run(adhoc, env=env, cwd=work).stdout
    facts = json.loads(out.split("=>", 1)[1])["ansible_facts"]["bwtune_checkpoint"]
    from_repo = json.dumps(gather(str(REPO / EXAMPLE_MODEL), True))
    assert facts == json.loads(from_repo.replace(str(REPO), str(collection)))
