#!/usr/bin/env bash
# Starts or stops a real Ray head (with the dashboard) on loopback, the peer used by
# tests/ray_dashboard_real.rs.
#
#   scripts/ray-peer.sh start   # prints the dashboard URL as the last line of stdout
#   scripts/ray-peer.sh stop
#
# Environment: RAY_PEER_DASHBOARD_PORT (8265), RAY_PEER_GCS_PORT (6379),
# RAY_PEER_TEMP_DIR (<tmp>/quotagate-ray), RAY_PEER_VENV (<repo>/.venv-ray),
# RAY_PEER_AUTH_TOKEN (unset: no auth; set: the head requires this token, RAY_AUTH_MODE=token).
# Note: `ray stop` stops every Ray process of this user on the host, not only this head.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RAY_PEER_VENV:-$ROOT/.venv-ray}"
DASH_PORT="${RAY_PEER_DASHBOARD_PORT:-8265}"
GCS_PORT="${RAY_PEER_GCS_PORT:-6379}"
# Short path: Ray puts Unix sockets under it and socket paths are limited to ~107 bytes.
TEMP_DIR="${RAY_PEER_TEMP_DIR:-${TMPDIR:-/tmp}/quotagate-ray}"
DASH="http://127.0.0.1:$DASH_PORT"

export RAY_USAGE_STATS_ENABLED=0
# Without this Ray replaces 127.0.0.1 with the host's routable IP on Linux; every `ray` call needs it.
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0

if [ -n "${RAY_PEER_AUTH_TOKEN:-}" ]; then
  export RAY_AUTH_MODE=token RAY_AUTH_TOKEN="$RAY_PEER_AUTH_TOKEN"
fi

die() { echo "ray-peer: $*" >&2; exit 1; }

healthy() { curl -sf --max-time 2 "$DASH/api/gcs_healthz" >/dev/null 2>&1; }

start() {
  [ -x "$VENV/bin/ray" ] || die "no Ray in $VENV; run scripts/install-ray.sh"
  if healthy; then
    echo "ray-peer: a head already answers on $DASH; reusing it" >&2
    echo "$DASH"
    return 0
  fi
  mkdir -p "$TEMP_DIR"
  "$VENV/bin/ray" start --head --node-ip-address 127.0.0.1 --port "$GCS_PORT" \
    --dashboard-host 127.0.0.1 --dashboard-port "$DASH_PORT" --include-dashboard true \
    --num-cpus 2 --object-store-memory 200000000 --temp-dir "$TEMP_DIR" \
    --disable-usage-stats >&2
  for _ in $(seq 1 120); do
    if healthy; then echo "$DASH"; return 0; fi
    sleep 0.5
  done
  die "head did not become healthy on $DASH within 60 s (logs: $TEMP_DIR/session_latest/logs)"
}

stop() {
  if [ ! -x "$VENV/bin/ray" ]; then
    echo "ray-peer: no Ray in $VENV; nothing to stop" >&2
    return 0
  fi
  mkdir -p "$TEMP_DIR"
  # `ray stop` prints every process command line; keep that in a log, not on the terminal.
  if "$VENV/bin/ray" stop >"$TEMP_DIR/ray-stop.log" 2>&1 || "$VENV/bin/ray" stop --force >>"$TEMP_DIR/ray-stop.log" 2>&1; then
    echo "ray-peer: stopped ($(grep -o 'Stopped all [0-9]* Ray processes' "$TEMP_DIR/ray-stop.log" || echo 'no Ray processes found'))" >&2
  else
    die "ray stop failed; see $TEMP_DIR/ray-stop.log"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 start|stop" ;;
esac
