#!/usr/bin/env bash
# Run `ansible-test sanity` on the collection without Docker.
#
# ansible-test needs the collection in a real .../ansible_collections/bwtune/sglang
# directory (it refuses a symlink), so the tracked and not-ignored files are copied
# there. Its --venv mode first downloads a get-pip script from a host these machines
# cannot reach; a stand-in at the cache path that uses ensurepip does the same job.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mkdir -p build
# Outside the repo: inside it, ansible-test would ask git and see only ignored files.
work=$(mktemp -d "${TMPDIR:-/tmp}/bwtune-ansible-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
dest=$work/ansible_collections/bwtune/sglang

pip_version=$(python - <<'PY'
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
print(get_venv_packages(NativePythonConfig(version="3.11", path="/usr/bin/python3"))["pip"])
PY
)
cache=~/.ansible/test/cache/get_pip_${pip_version//./_}.py
mkdir -p "$(dirname "$cache")"
cat >"$cache" <<'PY'
# Offline stand-in for get-pip.py: ansible-test runs it as `python get_pip.py <pip args>`.
import os, subprocess, sys
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"], env=os.environ)
subprocess.check_call([sys.executable, "-m", "pip", "install", *args], env=os.environ)
PY

mkdir -p "$dest"
# Exactly what the collection ships: its galaxy tarball (galaxy.yml's build_ignore leaves
# out the Python package, tests, Molecule scenarios and tools), unpacked, plus
# ansible-test's own config (tests/config.yml, tests/sanity/ if any).
ansible-galaxy collection build --output-path "$work/tarball" "$root" >/dev/null
tar -C "$dest" -xzf "$work"/tarball/*.tar.gz
(cd "$root" && git ls-files -co --exclude-standard -z -- tests/config.yml tests/sanity \
    | tar --null -T - -cf -) | tar -C "$dest" -xf -
cd "$dest"
ansible-test sanity --venv --python 3.11 "$@"
