#!/usr/bin/env bash
# What examples/numpy needs: washout in .venv, whose python (with numpy and scipy, both
# washout dependencies) runs the kernels. Idempotent: installs only what is missing.
# --check: only check, install nothing.
set -euo pipefail
check=""
[ "${1:-}" = --check ] && check=--check
cd "$(dirname "$0")/../.."
[ -n "$check" ] || [ -x .venv/bin/washout ] || { python3 -m venv .venv && .venv/bin/pip install -q -e '.[report]'; }
python="${NUMPY_PYTHON:-.venv/bin/python3}"
"$python" -c "import numpy, scipy.sparse" 2>/dev/null && exit 0
[ -z "$check" ] || { echo "$python cannot import numpy and scipy.sparse" >&2; exit 1; }
"$python" -m pip install -q numpy scipy
