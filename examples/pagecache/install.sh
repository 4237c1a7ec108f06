#!/usr/bin/env bash
# What examples/pagecache needs: fio (Debian package fio), and washout itself in .venv.
# Idempotent: installs only what is missing. --check: only check, install nothing.
set -euo pipefail
check=""
[ "${1:-}" = --check ] && check=--check
cd "$(dirname "$0")/../.."
bash scripts/services/examples.sh $check fio:fio
[ -n "$check" ] || [ -x .venv/bin/washout ] || { python3 -m venv .venv && .venv/bin/pip install -q -e '.[report]'; }
