#!/usr/bin/env bash
# The local Kubernetes control plane kstack is tested against and deploys onto:
# real etcd, kube-apiserver, kube-controller-manager and kube-scheduler on 127.0.0.1,
# nodes simulated by kwok, and one real node (containerd, kubelet, kube-proxy, CoreDNS: see
# hack/realnode.sh) where pods run as real containers.
#
#   devcluster.sh up [--nodes control=3,compute=3,network=1,storage=1|none] [--real-nodes 0-3]
#   devcluster.sh down [--purge] | status | kubeconfig
#
# The cluster's data (etcd, the real node's volumes) outlives `down` and `up`: `up` restarts only
# the components that do not answer their health endpoint and reuses the data it finds; only
# `down --purge` deletes it.
#
# Role labels: simulated nodes carry <prefix><role>=true ($KSTACK_ROLE_LABEL_PREFIX, default
# kstack.io/role-). The real node carries every role: under the same prefix when there are no
# simulated nodes (--nodes none), else under $KSTACK_DEV_REAL_ROLE_PREFIX (default
# kstack.io/real-role-), so a cloud lands on it only when its globals.yml sets
# `kstack_role_label_prefix` to that prefix. Image archives named in $KSTACK_DEV_IMAGES
# (directories made by hack/images.sh) are imported into the real node's containerd.
#
# State (PKI, kubeconfig, pids, logs) lives in $KSTACK_DEV_DIR (default ~/.cache/kstack/dev).
# Ports: $KSTACK_DEV_PORT_BASE (default 16440): +0 apiserver, +1 etcd client, +2 etcd peer,
# +3 controller-manager, +4 scheduler, +5 kwok.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${KSTACK_DEV_DIR:-$HOME/.cache/kstack/dev}
BASE=${KSTACK_DEV_PORT_BASE:-16440}
API=$BASE ETCD=$((BASE + 1)) PEER=$((BASE + 2)) KCM=$((BASE + 3)) SCHED=$((BASE + 4)) KWOKP=$((BASE + 5))
KCFG=$DIR/kubeconfig
COMPONENTS="etcd kube-apiserver kube-controller-manager kube-scheduler kwok"
ROLE_PREFIX=${KSTACK_ROLE_LABEL_PREFIX:-kstack.io/role-}

say() { echo "kstack dev: $*" >&2; }
die() { say "$*"; exit 1; }

# shellcheck source=hack/pidfile.sh
. "$HERE/pidfile.sh"
pid_of() { pid_in "$DIR/pids/$1"; }
alive() { [ -n "$(pid_of "$1")" ]; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# healthy NAME: the component answers its health endpoint (a live PID alone is not enough: an
# API server that is shutting down still has one).
healthy() {
  local P=$DIR/pki
  case "$1" in
    etcd) curl -sf -m 3 "http://127.0.0.1:$ETCD/health" >/dev/null 2>&1;;
    kube-apiserver) curl -sf -m 3 --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" \
      "https://127.0.0.1:$API/readyz" >/dev/null 2>&1;;
    kube-controller-manager) curl -skf -m 3 "https://127.0.0.1:$KCM/healthz" >/dev/null 2>&1;;
    kube-scheduler) curl -skf -m 3 "https://127.0.0.1:$SCHED/healthz" >/dev/null 2>&1;;
    kwok) curl -sf -m 3 "http://127.0.0.1:$KWOKP/healthz" >/dev/null 2>&1;;
    *) return 1;;
  esac
}

stop_one() { stop_pid_in "$DIR/pids/$1" 5; }

stop_all() { # stop_all [--purge]: stops every process; --purge also deletes the cluster's data
  local c
  # A Ceph cluster started on the real node's address (hack/ceph.sh) goes with the node, when
  # the node is this cluster's.
  if [ -d /run/kstack-ceph ] && [ "$(cat /run/kstack-real-node.owner 2>/dev/null)" = "$DIR" ]; then
    bash "$HERE/ceph.sh" down
  fi
  KSTACK_DEV_DIR=$DIR KSTACK_DEV_PORT_BASE=$BASE bash "$HERE/realnode.sh" down "$@"
  for c in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_one "$c"; done
  if [ "${1:-}" = --purge ]; then rm -rf "$DIR/etcd-data"; fi
}

start() { # start NAME BINARY ARGS...: runs in the background, logs to $DIR/logs/NAME.log
  local name=$1; shift
  "$@" >"$DIR/logs/$name.log" 2>&1 &
  echo $! >"$DIR/pids/$name"
}

wait_for() { # wait_for WHAT SECONDS COMMAND...
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    for c in $COMPONENTS; do
      if [ -f "$DIR/pids/$c" ] && ! alive "$c"; then
        say "$c exited while waiting for $what; last lines of $DIR/logs/$c.log:"
        tail -n 15 "$DIR/logs/$c.log" >&2 || true
        stop_all; exit 1
      fi
    done
    if [ $SECONDS -ge $deadline ]; then
      say "timed out after ${secs}s waiting for $what (logs in $DIR/logs)"; stop_all; exit 1
    fi
    sleep 0.2
  done
}

pki() {
  local P=$DIR/pki
  [ -f "$P/admin.crt" ] && return 0
  mkdir -p "$P"
  (
    cd "$P"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=kstack-dev-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out apiserver.crt \
      -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc,IP:10.96.0.1\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\nbasicConstraints=CA:FALSE') 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=kstack-admin" 2>/dev/null
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out admin.crt \
      -extfile <(printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\nbasicConstraints=CA:FALSE') 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.csr
  )
}

kubeconfig() {
  local P=$DIR/pki
  cat >"$KCFG" <<KC
apiVersion: v1
kind: Config
clusters:
- name: kstack-dev
  cluster:
    server: https://127.0.0.1:$API
    certificate-authority-data: $(base64 -w0 "$P/ca.crt")
users:
- name: kstack-admin
  user:
    client-certificate-data: $(base64 -w0 "$P/admin.crt")
    client-key-data: $(base64 -w0 "$P/admin.key")
contexts:
- name: kstack-dev
  context: {cluster: kstack-dev, user: kstack-admin}
current-context: kstack-dev
KC
  chmod 600 "$KCFG"
}

stages() { # kwok's fast stages, with per-pod delays read from labels, plus kstack's failure stages
  local S=$1/kwok-stages
  {
    cat "$S/node/fast/node-initialize.yaml"; echo '---'
    cat "$S/node/heartbeat/node-heartbeat.yaml"; echo '---'
    # Readiness delay per pod: label kstack.io/dev-ready-delay (a duration such as 2s or 1500ms).
    sed 's#^  next:#  delay:\n    durationMilliseconds: 0\n    durationFrom:\n      expressionFrom: '"'"'.metadata.labels["kstack.io/dev-ready-delay"]'"'"'\n  next:#' \
      "$S/pod/fast/pod-ready.yaml"; echo '---'
    # Job completion delay per pod: label kstack.io/dev-complete-delay.
    sed 's#^  next:#  delay:\n    durationMilliseconds: 0\n    durationFrom:\n      expressionFrom: '"'"'.metadata.labels["kstack.io/dev-complete-delay"]'"'"'\n  next:#' \
      "$S/pod/fast/pod-complete.yaml"; echo '---'
    cat "$S/pod/fast/pod-delete.yaml"; echo '---'
    for f in pv-bind pv-delete pvc-provision pvc-delete; do cat "$S/volume/fast/$f.yaml"; echo '---'; done
    cat "$HERE/dev-stages.yaml"
  } >"$DIR/kwok.yaml"
}

nodes_yaml() { # nodes_yaml "control=3,compute=3,network=1,storage=1"
  local spec=$1 role count i
  IFS=, read -ra parts <<<"$spec"
  for part in "${parts[@]}"; do
    role=${part%%=*}; count=${part#*=}
    case "$role" in control|compute|network|storage) ;; *) die "unknown node role '$role' in --nodes (use control, compute, network, storage)";; esac
    [[ "$count" =~ ^[0-9]+$ ]] || die "node count for '$role' must be a number, got '$count'"
    for ((i = 1; i <= count; i++)); do
      cat <<N
---
apiVersion: v1
kind: Node
metadata:
  name: $role-$i
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels:
    kubernetes.io/hostname: $role-$i
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
    ${ROLE_PREFIX}$role: "true"
spec:
  providerID: kwok://$role-$i
status:
  allocatable: {cpu: "32", memory: 128Gi, pods: "110"}
  capacity: {cpu: "32", memory: 128Gi, pods: "110"}
N
    done
  done
}

real_status() { KSTACK_DEV_DIR=$DIR KSTACK_DEV_PORT_BASE=$BASE bash "$HERE/realnode.sh" status >/dev/null; }
real_count() { KSTACK_DEV_DIR=$DIR KSTACK_DEV_PORT_BASE=$BASE bash "$HERE/realnode.sh" count; }

cmd_up() {
  local spec="" real=${KSTACK_DEV_REAL_NODES:-}
  while [ $# -gt 0 ]; do
    case "$1" in
      --nodes) spec=$2; shift 2;;
      --nodes=*) spec=${1#*=}; shift;;
      --real-nodes) real=$2; shift 2;;
      --real-nodes=*) real=${1#*=}; shift;;
      *) die "unknown option '$1' (usage: kstack dev up [--nodes control=3,compute=3,network=1,storage=1|none] [--real-nodes 0-3])";;
    esac
  done
  # A cluster whose data is kept comes back with the nodes it had (a restart after a crash must
  # not add a real node nobody asked for); options given now win.
  if [ -d "$DIR/etcd-data/member" ]; then
    [ -n "$spec" ] || spec=$(cat "$DIR/nodes-spec" 2>/dev/null || true)
    [ -n "$real" ] || real=$(cat "$DIR/real-nodes" 2>/dev/null || true)
  fi
  [ -n "$spec" ] || spec="control=3,compute=3,network=1,storage=1"
  [ -n "$real" ] || real=1
  case "$real" in 0|1|2|3) ;; *) die "--real-nodes must be 0 to 3 (real nodes share this machine's CPUs and memory), got '$real'";; esac
  local asked_spec=$spec
  [ "$spec" = none ] && spec=""
  [ -n "$spec" ] || [ "$real" -ge 1 ] || die "no nodes asked for: give --nodes or --real-nodes 1"
  local total=0 n
  for n in $(tr ',' '\n' <<<"$spec" | cut -d= -f2); do [[ "$n" =~ ^[0-9]+$ ]] && total=$((total + n)); done
  [ "$total" -le 1000 ] || die "at most 1000 simulated nodes are supported, asked for $total"

  local c all=1
  for c in $COMPONENTS; do healthy "$c" || all=0; done
  if [ $all = 1 ] && { [ "$real" = 0 ] || { real_status && [ "$(real_count)" = "$real" ]; }; }; then
    say "already running"; echo "$KCFG"; return 0
  fi
  # What is down (or does not answer) is started again; what answers is left alone.
  local down=""
  for c in $COMPONENTS; do
    healthy "$c" && continue
    if alive "$c"; then
      # Still starting or shutting down: give it a moment to settle either way.
      for _ in $(seq 1 50); do healthy "$c" && break; alive "$c" || break; sleep 0.2; done
      healthy "$c" && continue
      stop_one "$c"
    fi
    rm -f "$DIR/pids/$c"
    down="$down $c"
  done
  # Before anything starts: a real node that cannot start says what is missing.
  if [ "$real" -ge 1 ] && [ "$(real_count)" = 0 ]; then
    KSTACK_DEV_DIR=$DIR KSTACK_DEV_PORT_BASE=$BASE bash "$HERE/realnode.sh" down
    KSTACK_DEV_DIR=$DIR KSTACK_DEV_PORT_BASE=$BASE bash "$HERE/realnode.sh" preflight || exit 1
  fi
  local port_of_etcd=$ETCD,$PEER port_of_apiserver=$API port_of_kcm=$KCM port_of_sched=$SCHED port_of_kwok=$KWOKP
  for c in $down; do
    local ports
    case "$c" in
      etcd) ports=$port_of_etcd;; kube-apiserver) ports=$port_of_apiserver;;
      kube-controller-manager) ports=$port_of_kcm;; kube-scheduler) ports=$port_of_sched;; kwok) ports=$port_of_kwok;;
    esac
    for p in ${ports//,/ }; do
      port_in_use "$p" && die "port 127.0.0.1:$p is already in use; stop what holds it or pick other ports with KSTACK_DEV_PORT_BASE=<port>"
    done
  done
  local BIN
  BIN=$(bash "$HERE/build-k8s.sh") || die "building the control plane failed (see above)"
  mkdir -p "$DIR/logs" "$DIR/pids"
  echo "$real" >"$DIR/real-nodes"; echo "$asked_spec" >"$DIR/nodes-spec"
  pki; kubeconfig; stages "$BIN"
  trap 'say "interrupted; stopping"; stop_all; exit 1' INT TERM
  local P=$DIR/pki t0=$SECONDS
  if [ -d "$DIR/etcd-data/member" ]; then
    say "reusing the cluster's data in $DIR/etcd-data (kstack dev down --purge deletes it)"
  fi
  [ -z "$down" ] || [ "$down" = " $COMPONENTS" ] || say "starting again what did not answer:$down"

  case "$down" in *" etcd"*)
  start etcd "$BIN/etcd" --name=kstack --data-dir="$DIR/etcd-data" --unsafe-no-fsync \
    --listen-client-urls="http://127.0.0.1:$ETCD" --advertise-client-urls="http://127.0.0.1:$ETCD" \
    --listen-peer-urls="http://127.0.0.1:$PEER" --initial-advertise-peer-urls="http://127.0.0.1:$PEER" \
    --initial-cluster="kstack=http://127.0.0.1:$PEER" --listen-metrics-urls="" --log-level=warn;;
  esac
  wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD/health"

  case "$down" in *" kube-apiserver"*)
  # Every address, not only loopback: pods on the real node reach it at the node IP through the
  # `kubernetes` Service (realnode.sh writes that endpoint). Clients still need a certificate.
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD" \
    --bind-address=0.0.0.0 --secure-port="$API" --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --cert-dir="$P" --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
    --client-ca-file="$P/ca.crt" --authorization-mode=Node,RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true \
    --disable-admission-plugins=ServiceAccount \
    --kubelet-preferred-address-types=InternalIP \
    --kubelet-client-certificate="$P/admin.crt" --kubelet-client-key="$P/admin.key" \
    --default-not-ready-toleration-seconds=10 --default-unreachable-toleration-seconds=10;;
  esac
  wait_for kube-apiserver 90 "$BIN/kubectl" --kubeconfig="$KCFG" get --raw /readyz

  case "$down" in *" kube-controller-manager"*)
  # --node-monitor-grace-period: nodes whose heartbeats stopped only because the API server
  # was away (kstack's outage test keeps it down 30 s) are not marked NotReady. A real kubelet
  # would mark its pods ready again afterwards; kwok leaves the Ready=False the node
  # controller wrote, so the simulated cloud would stay unready for good.
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$KCFG" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port="$KCM" --service-account-private-key-file="$P/sa.key" \
    --root-ca-file="$P/ca.crt" --use-service-account-credentials=false --node-monitor-grace-period=90s \
    --concurrent-deployment-syncs=20 --concurrent-replicaset-syncs=20 --concurrent-job-syncs=20 \
    --kube-api-qps=200 --kube-api-burst=400;;
  esac
  case "$down" in *" kube-scheduler"*)
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$KCFG" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port="$SCHED" --kube-api-qps=200 --kube-api-burst=400;;
  esac
  case "$down" in *" kwok"*)
  start kwok "$BIN/kwok" --kubeconfig="$KCFG" --config="$DIR/kwok.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --cidr=10.244.0.0/16 --node-ip=127.0.0.1 --node-name=localhost \
    --node-port="$KWOKP" --server-address="127.0.0.1:$KWOKP";;
  esac
  wait_for "every control plane component to answer" 60 bash -c "$(declare -f healthy); DIR='$DIR' API=$API ETCD=$ETCD KCM=$KCM SCHED=$SCHED KWOKP=$KWOKP; for c in $COMPONENTS; do healthy \$c || exit 1; done"

  wait_for "the default namespace" 60 "$BIN/kubectl" --kubeconfig="$KCFG" get namespace default
  nodes_yaml "$spec" >"$DIR/nodes.yaml"
  [ "$total" -eq 0 ] || "$BIN/kubectl" --kubeconfig="$KCFG" apply --server-side -f "$DIR/nodes.yaml" >/dev/null
  # The default StorageClass: claims without a class get it, and kwok's pvc-provision stage
  # binds claims of this class to a simulated volume (as a real cluster's provisioner would).
  "$BIN/kubectl" --kubeconfig="$KCFG" apply --server-side -f - >/dev/null <<'SC'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: kwok-volume
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kwok.x-k8s.io/volume
volumeBindingMode: Immediate
reclaimPolicy: Delete
SC
  wait_for "$total nodes to be Ready" 300 bash -c \
    "[ \"\$('$BIN/kubectl' --kubeconfig='$KCFG' get nodes --no-headers -l type=kwok 2>/dev/null | awk '\$2==\"Ready\"' | wc -l)\" -ge $total ]"
  if [ "$real" -ge 1 ] && ! { real_status && [ "$(real_count)" = "$real" ]; }; then
    local real_prefix=$ROLE_PREFIX
    [ "$total" -eq 0 ] || real_prefix=${KSTACK_DEV_REAL_ROLE_PREFIX:-kstack.io/real-role-}
    KSTACK_DEV_DIR=$DIR KSTACK_DEV_PORT_BASE=$BASE bash "$HERE/realnode.sh" up "$BIN" "$real_prefix" "$real" || { stop_all; exit 1; }
  fi
  say "up in $((SECONDS - t0))s: $total simulated nodes, $real real; logs in $DIR/logs"
  trap - INT TERM
  echo "$KCFG"
}

cmd_status() {
  local c rc=0
  for c in $COMPONENTS; do
    if healthy "$c"; then printf '%-24s running, answering (pid %s)\n' "$c" "$(pid_of "$c")"
    elif alive "$c"; then printf '%-24s running but not answering its health check (pid %s)\n' "$c" "$(pid_of "$c")"; rc=3
    else printf '%-24s stopped\n' "$c"; rc=3; fi
  done
  if [ "$(cat "$DIR/real-nodes" 2>/dev/null || echo 0)" -ge 1 ]; then
    KSTACK_DEV_DIR=$DIR KSTACK_DEV_PORT_BASE=$BASE bash "$HERE/realnode.sh" status || rc=3
  fi
  [ -f "$KCFG" ] && printf '%-24s %s\n' kubeconfig "$KCFG"
  return $rc
}

case "${1:-}" in
  up) shift; cmd_up "$@";;
  down) shift
    case "${1:-}" in
      "") stop_all; say "stopped; the cluster's data is kept for the next \`kstack dev up\` (\`kstack dev down --purge\` deletes it)";;
      --purge) stop_all --purge; say "stopped; the cluster's data is deleted";;
      *) die "unknown option '$1' (usage: kstack dev down [--purge])";;
    esac;;
  status) cmd_status;;
  kubeconfig) [ -f "$KCFG" ] || die "no local cluster has been started (run: kstack dev up)"; echo "$KCFG";;
  import) shift; KSTACK_DEV_DIR=$DIR KSTACK_DEV_PORT_BASE=$BASE bash "$HERE/realnode.sh" import "$@";;
  *) die "usage: devcluster.sh up [--nodes control=3,compute=3,network=1,storage=1|none] [--real-nodes 0-3] | down [--purge] | status | kubeconfig | import DIR...";;
esac
