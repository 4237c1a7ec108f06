#!/bin/sh
# A private redis-server for the example: start | stop | restart (empty).
# Port REDIS_PORT (default 6479), data directory REDIS_DIR (default /tmp/washout-redis-PORT);
# no persistence, so a restart always comes back empty.
set -eu
PORT="${REDIS_PORT:-6479}"
DIR="${REDIS_DIR:-/tmp/washout-redis-$PORT}"

stop() {
  if redis-cli -p "$PORT" ping >/dev/null 2>&1; then
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  fi
  i=0
  while redis-cli -p "$PORT" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ "$i" -le 100 ] || { echo "redis on port $PORT did not stop" >&2; exit 1; }
    sleep 0.05
  done
}

start() {
  mkdir -p "$DIR"
  # daemonize: the server leaves this command's process group, so it outlives the command.
  redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DIR" --save '' --appendonly no \
    --daemonize yes --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log"
  i=0
  until [ "$(redis-cli -p "$PORT" ping 2>/dev/null)" = PONG ]; do
    i=$((i + 1)); [ "$i" -le 200 ] || { echo "redis on port $PORT did not start: see $DIR/redis.log" >&2; exit 1; }
    sleep 0.05
  done
  keys="$(redis-cli -p "$PORT" dbsize)"
  [ "$keys" = 0 ] || { echo "redis on port $PORT started with $keys keys, expected none" >&2; exit 1; }
}

case "${1:-}" in
  start) stop; start ;;
  stop) stop; rm -rf "$DIR" ;;
  restart) stop; start ;;
  *) echo "usage: $0 start|stop|restart" >&2; exit 2 ;;
esac
