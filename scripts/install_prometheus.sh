#!/usr/bin/env bash
# Install Debian's `prometheus` package for the live Prometheus test; a no-op when the
# binary is already on PATH. The package's own service is kept from starting (a
# policy-rc.d that denies it during the install) and, where systemd runs, stopped and
# disabled, so nothing stays bound: the tests start their own Prometheus.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
POLICY=/usr/sbin/policy-rc.d
ADDED=""
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod +x "$POLICY"
    ADDED=1
fi
cleanup() { if [ -n "$ADDED" ]; then $SUDO rm -f "$POLICY"; fi; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends prometheus
if [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
command -v prometheus >/dev/null
