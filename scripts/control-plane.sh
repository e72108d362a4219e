#!/usr/bin/env bash
# A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler, built from their Go modules (hack/control-plane/) and run as this user's processes.
#
#   scripts/control-plane.sh build   build the four binaries once into a cache folder (outside git)
#   scripts/control-plane.sh up      start them (building first if needed), wait for /readyz
#   scripts/control-plane.sh env     print `export KUBECONFIG=<admin kubeconfig>`
#   scripts/control-plane.sh down    stop exactly what `up` started (by its PID files)
#   scripts/control-plane.sh status  say whether it is up
#
# Environment:
#   QUOTAGATE_CONTROL_PLANE_CACHE  where the binaries go
#                                  (default ${XDG_CACHE_HOME:-$HOME/.cache}/quotagate/control-plane/<version>)
#   QUOTAGATE_CONTROL_PLANE_DIR    where a running control plane keeps its certificates, data, logs and
#                                  PID files (default <cache>/run); one directory, one control plane
set -euo pipefail

KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${QUOTAGATE_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quotagate/control-plane/$KUBE_VERSION-etcd$ETCD_VERSION}"
BIN="$CACHE/bin"
RUN="${QUOTAGATE_CONTROL_PLANE_DIR:-$CACHE/run}"
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler)

die() { echo "control-plane: error: $*" >&2; exit 1; }
say() { echo "control-plane: $*" >&2; }

# The inputs of a build: when they change, the binaries are built again.
build_stamp() {
  cat "$ROOT/hack/control-plane/kubernetes/go.mod" "$ROOT/hack/control-plane/kubernetes/go.sum" \
    "$ROOT/hack/control-plane/etcd/go.mod" "$ROOT/hack/control-plane/etcd/go.sum" \
    "$ROOT/hack/control-plane/etcd/main.go" | sha256sum | cut -d' ' -f1
}

built() {
  local c
  for c in "${COMPONENTS[@]}"; do [ -x "$BIN/$c" ] || return 1; done
  [ "$(cat "$BIN/.stamp" 2>/dev/null)" = "$(build_stamp)" ]
}

cmd_build() {
  if built; then
    say "binaries already built in $BIN"
    return 0
  fi
  if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
  fi
  command -v go >/dev/null 2>&1 || die "Go is needed to build the control plane (https://go.dev/dl/)"
  mkdir -p "$BIN"
  # Go's own module and build caches are reused; only the linked binaries land in $BIN.
  export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
  local major minor ver pkg
  ver="${KUBE_VERSION#v}"; major="${ver%%.*}"; minor="${ver#*.}"; minor="${minor%%.*}"
  local ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean"
  done
  local start=$SECONDS
  say "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBE_VERSION into $BIN"
  (cd "$ROOT/hack/control-plane/kubernetes" &&
    nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$BIN/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler)
  say "building etcd $ETCD_VERSION"
  (cd "$ROOT/hack/control-plane/etcd" &&
    nice -n 10 go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" .)
  build_stamp >"$BIN/.stamp"
  say "built in $((SECONDS - start)) s"
}

pid_alive() { # pid-file component
  local pid
  pid="$(cat "$1" 2>/dev/null)" || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  # Only our binary counts: a PID the kernel reused for another process is not ours to stop.
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$BIN/$2")" ]
}

# Whether a component started by `start` has exited: its process is gone or a zombie. Not
# `pid_alive`: just after `start` the PID may still be the `setsid` that is about to exec the
# component, which `pid_alive` would take for a dead component.
exited() { # pid-file
  local pid state
  pid="$(cat "$1" 2>/dev/null)" || return 0
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 0
  state="$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null)" || return 0
  [ "$state" = Z ] || [ "$state" = X ]
}

api_ready() {
  [ -f "$RUN/port" ] || return 1
  curl -fsS --max-time 3 --cacert "$RUN/pki/ca.crt" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key" \
    "https://127.0.0.1:$(cat "$RUN/port")/readyz" >/dev/null 2>&1
}

is_up() {
  local c
  for c in "${COMPONENTS[@]}"; do pid_alive "$RUN/$c.pid" "$c" || return 1; done
  api_ready
}

free_ports() { # count
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

gen_cert() { # name subject [san]
  local name=$1 subj=$2 san=${3:-} ext
  ext="$(mktemp)"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then
      echo "extendedKeyUsage=serverAuth"
      echo "subjectAltName=$san"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$RUN/pki/$name.key" -subj "$subj" \
    -out "$RUN/pki/$name.csr" 2>/dev/null
  openssl x509 -req -in "$RUN/pki/$name.csr" -CA "$RUN/pki/ca.crt" -CAkey "$RUN/pki/ca.key" \
    -CAcreateserial -days 365 -extfile "$ext" -out "$RUN/pki/$name.crt" 2>/dev/null
  rm -f "$ext" "$RUN/pki/$name.csr"
}

write_kubeconfig() { # file user-cert-name server
  local b64='base64 -w0'
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: quotagate-control-plane
  cluster:
    server: $3
    certificate-authority-data: $($b64 <"$RUN/pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 <"$RUN/pki/$2.crt")
    client-key-data: $($b64 <"$RUN/pki/$2.key")
contexts:
- name: quotagate-control-plane
  context:
    cluster: quotagate-control-plane
    user: $2
current-context: quotagate-control-plane
EOF
  chmod 600 "$1"
}

start() { # component args...
  local c=$1; shift
  setsid "$BIN/$c" "$@" >"$RUN/logs/$c.log" 2>&1 </dev/null &
  echo $! >"$RUN/$c.pid"
}

cmd_up() {
  if is_up; then
    say "already up: $(cmd_env)"
    return 0
  fi
  local c
  for c in "${COMPONENTS[@]}"; do
    if pid_alive "$RUN/$c.pid" "$c"; then
      die "$c (pid $(cat "$RUN/$c.pid")) runs but the control plane is not ready; run '$0 down' first"
    fi
  done
  cmd_build
  command -v openssl >/dev/null 2>&1 || die "openssl is needed for the control plane's certificates"
  command -v curl >/dev/null 2>&1 || die "curl is needed to wait for /readyz"
  command -v python3 >/dev/null 2>&1 || die "python3 is needed to pick free ports"
  rm -rf "$RUN"
  mkdir -p "$RUN/pki" "$RUN/logs" "$RUN/etcd"
  chmod 700 "$RUN"

  local etcd_client etcd_peer api_port
  read -r etcd_client etcd_peer api_port <<<"$(free_ports 3)"
  echo "$api_port" >"$RUN/port"
  local server="https://127.0.0.1:$api_port"

  # A CA of its own, the API server's serving certificate, client certificates (admin in
  # system:masters; the controller manager and the scheduler as their bootstrap RBAC users) and the
  # service-account signing key.
  openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$RUN/pki/ca.key" -out "$RUN/pki/ca.crt" \
    -days 365 -subj "/CN=quotagate-control-plane-ca" 2>/dev/null
  gen_cert apiserver "/CN=kube-apiserver" \
    "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  gen_cert admin "/O=system:masters/CN=quotagate-admin"
  gen_cert kube-controller-manager "/CN=system:kube-controller-manager"
  gen_cert kube-scheduler "/CN=system:kube-scheduler"
  openssl genrsa -out "$RUN/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$RUN/pki/sa.key" -pubout -out "$RUN/pki/sa.pub" 2>/dev/null
  write_kubeconfig "$RUN/kubeconfig" admin "$server"
  write_kubeconfig "$RUN/kube-controller-manager.kubeconfig" kube-controller-manager "$server"
  write_kubeconfig "$RUN/kube-scheduler.kubeconfig" kube-scheduler "$server"

  start etcd --name default --data-dir "$RUN/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_client" --advertise-client-urls "http://127.0.0.1:$etcd_client" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "default=http://127.0.0.1:$etcd_peer" --unsafe-no-fsync --log-level warn
  start kube-apiserver --etcd-servers "http://127.0.0.1:$etcd_client" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --tls-cert-file "$RUN/pki/apiserver.crt" --tls-private-key-file "$RUN/pki/apiserver.key" \
    --client-ca-file "$RUN/pki/ca.crt" --authorization-mode Node,RBAC \
    --service-account-key-file "$RUN/pki/sa.pub" --service-account-signing-key-file "$RUN/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true \
    --enable-aggregator-routing=true
  local deadline=$((SECONDS + 120))
  until api_ready; do
    if exited "$RUN/kube-apiserver.pid" || exited "$RUN/etcd.pid"; then
      tail -n 20 "$RUN/logs/etcd.log" "$RUN/logs/kube-apiserver.log" >&2 || true
      cmd_down >/dev/null 2>&1 || true
      die "etcd or kube-apiserver exited during start (logs above)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 20 "$RUN/logs/kube-apiserver.log" >&2 || true
      cmd_down >/dev/null 2>&1 || true
      die "kube-apiserver not ready within 120 s"
    fi
    sleep 1
  done
  # Without serving ports of their own (--secure-port 0): nothing but the API server talks to them.
  start kube-controller-manager --kubeconfig "$RUN/kube-controller-manager.kubeconfig" --secure-port 0 \
    --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$RUN/pki/sa.key" --root-ca-file "$RUN/pki/ca.crt" \
    --cluster-signing-cert-file "$RUN/pki/ca.crt" --cluster-signing-key-file "$RUN/pki/ca.key" \
    --service-cluster-ip-range 10.0.0.0/24
  start kube-scheduler --kubeconfig "$RUN/kube-scheduler.kubeconfig" --secure-port 0 --leader-elect=false
  sleep 1
  for c in kube-controller-manager kube-scheduler; do
    if ! pid_alive "$RUN/$c.pid" "$c"; then
      tail -n 20 "$RUN/logs/$c.log" >&2 || true
      cmd_down >/dev/null 2>&1 || true
      die "$c exited during start (log above)"
    fi
  done
  say "up: kube-apiserver $KUBE_VERSION at $server (logs in $RUN/logs)"
  cmd_env
}

cmd_down() {
  local c pid stopped=0 i
  for c in kube-scheduler kube-controller-manager kube-apiserver etcd; do
    if pid_alive "$RUN/$c.pid" "$c"; then
      pid="$(cat "$RUN/$c.pid")"
      kill -TERM "$pid" 2>/dev/null || true
      for i in $(seq 1 100); do
        [ -d "/proc/$pid" ] || break
        sleep 0.1
      done
      [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
      stopped=$((stopped + 1))
    fi
    rm -f "$RUN/$c.pid"
  done
  say "down: stopped $stopped process(es)"
}

cmd_env() { echo "export KUBECONFIG=$RUN/kubeconfig"; }

cmd_status() {
  if is_up; then say "up: $(cmd_env)"; else say "not up"; return 1; fi
}

case "${1:-}" in
  build) cmd_build ;;
  up) cmd_up ;;
  down) cmd_down ;;
  env) cmd_env ;;
  status) cmd_status ;;
  bin-dir) echo "$BIN" ;;
  *) echo "usage: $0 build|up|down|env|status|bin-dir" >&2; exit 2 ;;
esac
