#!/usr/bin/env bash
# The real software the case studies under examples/ measure, from Debian: redis-server and
# redis-benchmark, fio, sysbench; gcc, which builds the commits of examples/bisect (and
# tests/test_bisect.py); and fincore (util-linux-extra), with which
# tests/test_examples.py checks what the page cache holds. That test runs each example shortly.
#   bash scripts/services/examples.sh                    # all of them (what scripts/test runs)
#   bash scripts/services/examples.sh fio:fio ...        # PACKAGE:PROGRAM pairs (install.sh)
#   bash scripts/services/examples.sh --check fio:fio    # only say what is missing (exit 1)
# Idempotent and quiet: does nothing when every program is on PATH (lib/apt.sh).
set -euo pipefail
check=""
[ "${1:-}" = --check ] && { check=1; shift; }
[ "$#" -gt 0 ] || set -- redis-server:redis-server redis-tools:redis-benchmark fio:fio sysbench:sysbench \
  gcc:cc util-linux-extra:fincore
missing=()
for pair in "$@"; do
  command -v "${pair#*:}" >/dev/null 2>&1 || missing+=("${pair%%:*}")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ -n "$check" ]; then
  echo "missing Debian packages: ${missing[*]} (install: bash scripts/services/examples.sh)" >&2
  exit 1
fi
. "$(dirname "$0")/lib/apt.sh"
# Where systemd runs, Debian's redis-server package also starts a system redis on port 6379;
# the examples use their own server on a private port and leave that one alone.
apt_install examples.sh "${missing[@]}"
