#!/usr/bin/env bash
# Print the folder holding PostgreSQL's initdb and pg_ctl (the tests' server runs from there).
# Looks on PATH, then in /usr/lib/postgresql/*/bin (the newest first); when neither has them
# and this runs as root (CI), installs Debian's `postgresql` package with apt-get, without
# creating or starting the package's own cluster (the tests start theirs and stop it).
# Exit 0 with the folder on stdout; exit 1 with one line on stderr saying why not.
set -euo pipefail

find_bin() {
  local initdb
  if initdb=$(command -v initdb 2>/dev/null) && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(readlink -f "$initdb")"
    return 0
  fi
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -V -r); do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
      echo "$dir"
      return 0
    fi
  done
  return 1
}

if find_bin; then
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "ensure-postgres: initdb/pg_ctl not found (PATH, /usr/lib/postgresql/*/bin) and not root to apt-get install postgresql" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-postgres: initdb/pg_ctl not found and there is no apt-get to install postgresql" >&2
  exit 1
fi

# Test workers may get here at once on a fresh machine: one installs, the others wait for it
# and then find what it installed.
exec 9>"${TMPDIR:-/tmp}/bwtune-ensure-postgres.lock"
flock 9
if find_bin; then
  exit 0
fi

# The package's postinst would create and start a cluster "main": say not to (postgresql-common
# reads createcluster.d), and keep services from starting during the install.
mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/bwtune-no-main.conf
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  made_policy=1
fi
log=$(mktemp)
status=0
{
  DEBIAN_FRONTEND=noninteractive apt-get update -q &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 --no-install-recommends postgresql
} >"$log" 2>&1 || status=$?
if [ "$made_policy" = 1 ]; then
  rm -f "$policy"
fi
if [ "$status" != 0 ]; then
  echo "ensure-postgres: apt-get install postgresql failed (exit $status): $(tail -n 1 "$log")" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
# Should a cluster have been started all the same, stop it: no server but the tests' own.
if command -v pg_lsclusters >/dev/null 2>&1; then
  pg_lsclusters --no-header 2>/dev/null | while read -r version name _port state _rest; do
    if [ "$state" = online ]; then
      pg_ctlcluster "$version" "$name" stop >/dev/null 2>&1 || true
    fi
  done
fi
if find_bin; then
  exit 0
fi
echo "ensure-postgres: installed postgresql but found no initdb/pg_ctl in /usr/lib/postgresql/*/bin" >&2
exit 1
