#!/usr/bin/env bash
# Installs Debian's Chromium for the dashboard browser test. The browser builds that playwright-core can download
# are not reachable from CI machines, so the test drives the distribution's package instead.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
/usr/bin/chromium --version
