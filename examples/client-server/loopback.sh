#!/usr/bin/env bash
# Two loopback SSH workers for a run of this example on one machine: sshd on free ports of
# 127.0.0.1, throw-away keys, and a HOME whose ~/.ssh/config names them cs-server and
# cs-client (nothing of your own ~/.ssh is read or changed). Directory CS_DIR (default
# /tmp/washout-cs).
#   eval "$(bash examples/client-server/loopback.sh start)"   # prints export HOME=...
#   bash examples/client-server/loopback.sh stop
set -euo pipefail
DIR="${CS_DIR:-/tmp/washout-cs}"
SSHD=/usr/sbin/sshd

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop() {
  for pid in "$DIR"/*/sshd.pid; do
    [ -e "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true
  done
  rm -rf "$DIR"
}

start() {
  [ -x "$SSHD" ] || { echo "sshd missing: bash scripts/services/sshd.sh" >&2; exit 1; }
  stop
  mkdir -p "$DIR/home/.ssh"
  [ "$(id -u)" -ne 0 ] || mkdir -p /run/sshd
  ssh-keygen -q -t ed25519 -N '' -f "$DIR/client_key"
  for role in server client; do
    port="$(free_port)"
    mkdir -p "$DIR/$role"
    ssh-keygen -q -t ed25519 -N '' -f "$DIR/$role/host_key"
    cp "$DIR/client_key.pub" "$DIR/$role/authorized_keys"
    cat > "$DIR/$role/sshd_config" <<CONFIG
Port $port
ListenAddress 127.0.0.1
HostKey $DIR/$role/host_key
PidFile $DIR/$role/sshd.pid
AuthorizedKeysFile $DIR/$role/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxSessions 100
LogLevel ERROR
CONFIG
    "$SSHD" -f "$DIR/$role/sshd_config" -E "$DIR/$role/sshd.log"
    echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$DIR/$role/host_key.pub")" >> "$DIR/home/.ssh/known_hosts"
    cat >> "$DIR/home/.ssh/config" <<CONFIG
Host cs-$role
  HostName 127.0.0.1
  Port $port
  User $(id -un)
  IdentityFile $DIR/client_key
CONFIG
  done
  echo "export HOME=$DIR/home"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
