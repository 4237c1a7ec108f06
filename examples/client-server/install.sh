#!/usr/bin/env bash
# What examples/client-server needs: redis-server and redis-benchmark (Debian packages
# redis-server, redis-tools) on the server and the client, sshd for the loopback workers
# of a run on one machine, and washout itself in .venv. Idempotent: installs only what
# is missing. --check: only check, install nothing.
set -euo pipefail
check=""
[ "${1:-}" = --check ] && check=--check
cd "$(dirname "$0")/../.."
bash scripts/services/examples.sh $check redis-server:redis-server redis-tools:redis-benchmark \
  openssh-server:sshd
[ -n "$check" ] || [ -x .venv/bin/washout ] || { python3 -m venv .venv && .venv/bin/pip install -q -e .; }
