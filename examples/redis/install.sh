#!/usr/bin/env bash
# What examples/redis needs: redis-server and redis-benchmark (Debian packages redis-server,
# redis-tools), and washout itself in .venv. Idempotent: installs only what is missing.
# --check: only check, install nothing.
set -euo pipefail
check=""
[ "${1:-}" = --check ] && check=--check
cd "$(dirname "$0")/../.."
bash scripts/services/examples.sh $check redis-server:redis-server redis-tools:redis-benchmark
[ -n "$check" ] || [ -x .venv/bin/washout ] || { python3 -m venv .venv && .venv/bin/pip install -q -e '.[report]'; }
