#!/usr/bin/env bash
# Headless Chromium and its driver from Debian's packages, for tests/campaign/web/test_browser.py
# (no browser is downloaded at run time).  Idempotent: installs only what is missing.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  echo "chromium_setup: $(chromium --version 2>/dev/null | head -1), chromedriver present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
echo "chromium_setup: $(chromium --version 2>/dev/null | head -1) installed"
