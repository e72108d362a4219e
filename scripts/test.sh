#!/usr/bin/env bash
# The test command of the README: installs the outside tools the tests talk to (real kubectl, a real Ray
# head, headless Chromium, helm), then runs every test. Safe to run again: installs are skipped when already there.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-kubectl.sh
bash scripts/install-ray.sh
bash scripts/install-chromium.sh
# The real control plane of tests/real_control_plane.rs and tests/differential.rs: built once from Go
# modules, then reused.
bash scripts/control-plane.sh build
# The real helm of tests/helm_chart.rs and tests/real_control_plane/helm.rs: built once from its Go
# module into the same cache, then reused.
bash scripts/install-helm.sh
# The process runtime's network namespaces (tests/embedded_process_runtime.rs), as root.
if { ! command -v ip || ! command -v nsenter; } >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get update -qq && apt-get install -y -qq iproute2 util-linux
fi

# With the tools installed, a test that cannot find them fails instead of skipping.
export QUOTAGATE_REQUIRE_TOOLS=1

# One kube and one k8s-openapi in the dependency graph, always.
if cargo tree -d --locked -e normal,build 2>/dev/null | grep -E '^(kube|k8s-openapi) v'; then
  echo "error: more than one version of kube or k8s-openapi in the dependency graph" >&2
  exit 1
fi

# The Rust habits CI keeps: formatted as rustfmt.toml says, and no clippy warning.
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings

cargo test --locked --no-fail-fast "$@"
