#!/usr/bin/env bash
# Install Debian's chromium for the report's headless-browser tests, once (idempotent).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "ensure_chromium.sh: chromium is missing and installing it needs root (apt-get install chromium)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null
