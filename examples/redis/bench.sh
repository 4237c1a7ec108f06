#!/bin/sh
# One redis-benchmark test against the example's server. Prints redis-benchmark's CSV (header
# and one row:
#   "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
# ) and then "server_cpu_ms: N", the CPU time (user + system) the server spent meanwhile, from
# INFO cpu before and after: the server's work, which a busy machine disturbs much less than
# the request rate.
# REDIS_REQUESTS (default 50000) requests from 50 clients, each pipelining REDIS_PIPELINE
# (default 16) requests, so that the server's work rather than loopback round trips dominates;
# random keys out of 100000, 1 KiB values. GET finds a value only for keys SET or MSET wrote
# earlier in the run, LPOP finds elements only if LPUSH ran before it.
set -eu
PORT="${REDIS_PORT:-6479}"
server_cpu() {
  redis-cli -p "$PORT" info cpu | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.6f", s }'
}
before="$(server_cpu)"
redis-benchmark -p "$PORT" -t "$1" -n "${REDIS_REQUESTS:-50000}" -P "${REDIS_PIPELINE:-16}" \
  -c 50 -r 100000 -d 1024 --csv
after="$(server_cpu)"
awk -v a="$before" -v b="$after" 'BEGIN { printf "server_cpu_ms: %.3f\n", (b - a) * 1000 }'
