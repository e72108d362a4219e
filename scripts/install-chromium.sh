#!/usr/bin/env bash
# Installs headless Chromium (Debian's chromium package) for the web view's browser test.
# Idempotent: does nothing when a chromium binary is already on PATH (or named by $CHROMIUM).
set -euo pipefail
if [ -n "${CHROMIUM:-}" ] && [ -x "$CHROMIUM" ]; then
  echo "chromium already installed: $CHROMIUM"
  exit 0
fi
if command -v chromium >/dev/null 2>&1; then
  echo "chromium already installed: $(command -v chromium)"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: chromium is missing and apt-get is not available; install Chromium and set CHROMIUM" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core
chromium --version
