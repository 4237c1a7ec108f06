#!/usr/bin/env bash
# What examples/pagecache needs: fio (Debian package fio), and washout itself in .venv.
# Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/services/examples.sh fio:fio
[ -x .venv/bin/washout ] || { python3 -m venv .venv && .venv/bin/pip install -q -e .; }
