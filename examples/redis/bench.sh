#!/bin/sh
# One redis-benchmark test against the example's server, as CSV (header + one row):
#   "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
# REDIS_REQUESTS (default 20000) requests from 50 clients, random keys out of 100000, 1 KiB
# values: GET finds a value only for keys SET or MSET wrote earlier in the run, LPOP finds
# elements only if LPUSH ran before it.
set -eu
PORT="${REDIS_PORT:-6479}"
exec redis-benchmark -p "$PORT" -t "$1" -n "${REDIS_REQUESTS:-20000}" -c 50 -r 100000 -d 1024 --csv
