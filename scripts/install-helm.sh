#!/usr/bin/env bash
# Builds the real helm CLI from its Go module (helm.sh/helm/v3, pinned) into a cache folder outside
# git, as scripts/control-plane.sh builds the control plane; nothing of it is committed.
# Idempotent: does nothing when the pinned version is already there. Prints the binary's path last.
#
# Environment:
#   HELM_VERSION           the version to build (default v3.22.0)
#   QUOTAGATE_HELM_CACHE   where the binary goes
#                          (default ${XDG_CACHE_HOME:-$HOME/.cache}/quotagate/helm/<version>)
set -euo pipefail
VERSION="${HELM_VERSION:-v3.22.0}"
CACHE="${QUOTAGATE_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quotagate/helm/$VERSION}"
HELM="$CACHE/bin/helm"
# The stamps helm's own Makefile sets: its version (without it `helm version` says only v3.22) and the
# Kubernetes version of its client-go (v0.37 in v3.22.0's go.mod), which `helm template` and `helm lint`
# take as the cluster's (without it they say v1.20, and a chart's kubeVersion is checked against that).
K8S_MINOR="${HELM_K8S_MINOR:-37}"
LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$VERSION"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  LDFLAGS+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$K8S_MINOR"
done

if [ -x "$HELM" ] && [ "$(cat "$CACHE/bin/.stamp" 2>/dev/null)" = "$LDFLAGS" ]; then
  echo "helm $VERSION already installed: $HELM" >&2
  echo "$HELM"
  exit 0
fi
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="$PATH:/usr/local/go/bin"
fi
command -v go >/dev/null 2>&1 || { echo "install-helm: error: Go is needed to build helm (https://go.dev/dl/)" >&2; exit 1; }
mkdir -p "$CACHE/bin"
start=$SECONDS
echo "install-helm: building helm $VERSION into $CACHE/bin" >&2
GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$CACHE/bin" nice -n 10 \
  go install -trimpath -ldflags "$LDFLAGS" "helm.sh/helm/v3/cmd/helm@$VERSION"
"$HELM" version --template '{{.Version}}' 2>/dev/null | grep -qx "$VERSION" ||
  { echo "install-helm: error: $HELM does not report $VERSION: $("$HELM" version 2>&1)" >&2; exit 1; }
echo "$LDFLAGS" >"$CACHE/bin/.stamp"
echo "install-helm: built in $((SECONDS - start)) s" >&2
echo "$HELM"
