#!/usr/bin/env bash
# What examples/numpy needs: washout in .venv, whose python (with numpy and scipy, both
# washout dependencies) runs the kernels. Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x .venv/bin/washout ] || { python3 -m venv .venv && .venv/bin/pip install -q -e .; }
.venv/bin/python3 -c "import numpy, scipy.sparse" 2>/dev/null || .venv/bin/pip install -q numpy scipy
