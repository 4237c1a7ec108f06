#!/usr/bin/env bash
# What examples/sysbench needs: sysbench (Debian package sysbench), and washout itself in
# .venv. Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/services/examples.sh sysbench:sysbench
[ -x .venv/bin/washout ] || { python3 -m venv .venv && .venv/bin/pip install -q -e .; }
