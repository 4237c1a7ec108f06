#!/usr/bin/env bash
# Linux perf for the counter metrics' tests (tests/test_counters.py runs `perf stat` around
# real trials; where the machine has no hardware counters, a VM, they check that such a
# metric is reported as not supported). Debian's linux-perf.
# Idempotent and quiet: does nothing when perf is installed (lib/apt.sh).
set -euo pipefail
command -v perf >/dev/null 2>&1 && exit 0
. "$(dirname "$0")/lib/apt.sh"
apt_install perf.sh linux-perf
