#!/usr/bin/env bash
# Creates .venv-ray/ in the repository root with a pinned Ray Serve, the peer used by
# tests/ray_dashboard_real.rs. Idempotent: does nothing when the pinned version is already installed.
set -euo pipefail

RAY_VERSION="${RAY_VERSION:-2.60.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-ray"
PYTHON="${PYTHON:-python3}"

installed_version() {
  "$VENV/bin/python" -c 'import ray; print(ray.__version__)' 2>/dev/null || true
}

if [ -x "$VENV/bin/ray" ] && [ "$(installed_version)" = "$RAY_VERSION" ]; then
  echo "ray $RAY_VERSION already installed in $VENV"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "ray[serve]==$RAY_VERSION"

got="$(installed_version)"
if [ "$got" != "$RAY_VERSION" ]; then
  echo "install-ray: expected ray $RAY_VERSION, found '${got:-none}'" >&2
  exit 1
fi
echo "ray $RAY_VERSION installed in $VENV"
