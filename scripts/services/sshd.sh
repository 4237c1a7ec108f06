#!/usr/bin/env bash
# OpenSSH server and rsync for the SSH worker tests (tests/sshd.py starts its own unprivileged
# sshd instances on 127.0.0.1 with generated keys; this script only installs the binaries).
# Idempotent and quiet: does nothing when both are installed (lib/apt.sh).
set -euo pipefail
[ -x /usr/sbin/sshd ] && command -v rsync >/dev/null 2>&1 && exit 0
. "$(dirname "$0")/lib/apt.sh"
apt_install sshd.sh openssh-server openssh-client rsync
# sshd refuses to start without its privilege-separation directory.
if [ "$(id -u)" -eq 0 ]; then mkdir -p /run/sshd; else sudo -n mkdir -p /run/sshd; fi
