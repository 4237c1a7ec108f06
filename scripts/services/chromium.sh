#!/usr/bin/env bash
# Headless Chromium for the report tests (tests/browser.py drives it through Playwright,
# pointed at this executable: nothing is downloaded besides Debian's package).
# Idempotent and quiet: does nothing when chromium is already installed (lib/apt.sh).
set -euo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
. "$(dirname "$0")/lib/apt.sh"
apt_install chromium.sh chromium fonts-dejavu-core
