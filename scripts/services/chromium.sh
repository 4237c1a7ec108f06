#!/usr/bin/env bash
# Headless Chromium for the report tests (tests/browser.py drives it through Playwright,
# pointed at this executable: nothing is downloaded besides Debian's package).
# Idempotent and quiet: does nothing when chromium is already installed; refreshes the
# package lists only when the package cannot be found without it; prints apt's output only
# when something fails.
set -euo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || {
    echo "chromium.sh: chromium is missing and this user cannot install it (not root, no sudo)" >&2
    exit 1
  }
  SUDO="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! apt-cache show chromium >/dev/null 2>&1; then
  $SUDO apt-get update -qq >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
fi
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >"$log" 2>&1 \
  || { cat "$log" >&2; exit 1; }
