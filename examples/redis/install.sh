#!/usr/bin/env bash
# What examples/redis needs: redis-server and redis-benchmark (Debian packages redis-server,
# redis-tools), and washout itself in .venv. Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/services/examples.sh redis-server:redis-server redis-tools:redis-benchmark
[ -x .venv/bin/washout ] || { python3 -m venv .venv && .venv/bin/pip install -q -e .; }
