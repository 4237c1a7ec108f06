#!/usr/bin/env bash
# OpenSSH server and rsync for the SSH worker tests (tests/sshd.py starts its own unprivileged
# sshd instances on 127.0.0.1 with generated keys; this script only installs the binaries).
# Idempotent and quiet: does nothing when both are installed; refreshes the package lists
# first (a fresh CI image has none); prints apt's output only when something fails.
set -euo pipefail
[ -x /usr/sbin/sshd ] && command -v rsync >/dev/null 2>&1 && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || {
    echo "sshd.sh: openssh-server or rsync is missing and this user cannot install them (not root, no sudo)" >&2
    exit 1
  }
  SUDO="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
$SUDO apt-get update -qq >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
$SUDO apt-get install -y -qq --no-install-recommends openssh-server openssh-client rsync >"$log" 2>&1 \
  || { cat "$log" >&2; exit 1; }
# sshd refuses to start without its privilege-separation directory.
$SUDO mkdir -p /run/sshd
