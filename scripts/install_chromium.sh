#!/usr/bin/env bash
# Debian's chromium (headless) for the report tests, which open generated reports in a
# real browser (tests/chromium.py). Idempotent: nothing happens when it is installed.
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
/usr/bin/chromium --version
