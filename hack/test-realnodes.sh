#!/usr/bin/env bash
# Several real nodes on one machine (`kstack dev up --real-nodes 3`): every node runs real pods in
# network, mount and UTS namespaces of its own; pods reach each other across nodes directly and
# through Services; a host-network pod has its node's address and name, and its host paths are
# the node's; the cluster shrinks to one node and is purged without leftovers. Prints the start
# time and memory of the nodes. Needs root, as the real node does.
set -uo pipefail
cd "$(dirname "$0")/.."
T=$(mktemp -d)
export KSTACK_DEV_DIR=$T/dev KSTACK_DEV_PORT_BASE=${KSTACK_TEST_REALNODES_PORT_BASE:-27500}
fails=0 passes=0
cleanup() { bash hack/devcluster.sh down --purge >/dev/null 2>&1 || true; rm -rf "$T"; }
trap cleanup EXIT
check() { # check NAME COMMAND...: passes when COMMAND succeeds
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then echo "ok   $name"; passes=$((passes + 1))
  else echo "FAIL $name: $out"; fails=$((fails + 1)); fi
}

BIN=$(bash hack/build-k8s.sh) || { echo "FAIL building the control plane"; exit 1; }
t0=$SECONDS
kc=$(bash hack/devcluster.sh up --nodes none --real-nodes 3 2>"$T/up.log") \
  || { echo "FAIL kstack dev up --real-nodes 3:"; cat "$T/up.log"; exit 1; }
up_s=$((SECONDS - t0))
K() { "$BIN/kubectl" --kubeconfig="$kc" "$@"; }

# The check's image: one static binary (hack/node/netcheck.c), imported into every node.
mkdir -p "$T/img/root" "$T/archive"
gcc -O2 -static -o "$T/img/root/netcheck" hack/node/netcheck.c || { echo "FAIL building netcheck (gcc -static)"; exit 1; }
python3 hack/node/image-archive.py kstack.local/netcheck:1 "$T/img/root" "$T/archive/images.tar" /netcheck
echo kstack.local/netcheck:1 >"$T/archive/images.txt"
bash hack/devcluster.sh import "$T/archive" 2>/dev/null || { echo "FAIL importing the image into every node"; exit 1; }

roles() { K get node "$1" -o go-template='{{range $k, $v := .metadata.labels}}{{$k}} {{end}}' | tr ' ' '\n' | sed -n 's|^kstack.io/role-||p' | sort | tr '\n' ' '; }
check "three real nodes, each with its roles" bash -c "
  [ \"\$($(declare -f roles K); BIN='$BIN' kc='$kc' roles kstack-real-1)\" = 'control storage ' ] &&
  [ \"\$($(declare -f roles K); BIN='$BIN' kc='$kc' roles kstack-real-2)\" = 'compute network ' ] &&
  [ \"\$($(declare -f roles K); BIN='$BIN' kc='$kc' roles kstack-real-3)\" = 'compute ' ] || { $(declare -f K); BIN='$BIN' kc='$kc' K get nodes --show-labels; exit 1; }"

pod() { # pod NAME NODE HOSTNET ARGS...
  local name=$1 node=$2 hostnet=$3; shift 3
  local args; args=$(printf '"%s",' "$@"); args=${args%,}
  cat <<P
apiVersion: v1
kind: Pod
metadata: {name: $name, labels: {app: $name}}
spec:
  nodeName: $node
  hostNetwork: $hostnet
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: kstack.local/netcheck:1, imagePullPolicy: Never, args: [$args],
                volumeMounts: [{name: run, mountPath: /probe}]}]
  volumes: [{name: run, hostPath: {path: /run/kstack-netcheck-$name, type: DirectoryOrCreate}}]
---
P
}
{
  for i in 1 2 3; do pod "srv-$i" "kstack-real-$i" false serve 8080; done
  pod host-2 kstack-real-2 true serve 18080
  cat <<S
apiVersion: v1
kind: Service
metadata: {name: svc-3}
spec: {selector: {app: srv-3}, ports: [{port: 80, targetPort: 8080}]}
S
} | K apply -f - >/dev/null
K wait --for=condition=Ready pod/srv-1 pod/srv-2 pod/srv-3 pod/host-2 --timeout=120s >/dev/null \
  || { echo "FAIL the check's pods did not start:"; K get pods -o wide; K describe pods | tail -30; exit 1; }
ip_of() { K get pod "$1" -o jsonpath='{.status.podIP}'; }
get() { K exec "$1" -- /netcheck get "$2" "$3"; }
expect() { # expect WANT COMMAND...: COMMAND's output is WANT
  local out; out=$("${@:2}" 2>&1) || { echo "$out"; return 1; }
  [ "$out" = "$1" ] || { echo "got '$out', want '$1'"; return 1; }
}
ip1=$(ip_of srv-1) ip2=$(ip_of srv-2) ip3=$(ip_of srv-3) svc=$(K get service svc-3 -o jsonpath='{.spec.clusterIP}')
check "a pod on node 1 reaches one on node 3, which sees its address" expect "srv-3 $ip1" get srv-1 "$ip3" 8080
check "a pod on node 3 reaches one on node 2" expect "srv-2 $ip3" get srv-3 "$ip2" 8080
check "a pod on node 2 reaches one on node 1" expect "srv-1 $ip2" get srv-2 "$ip1" 8080
check "a pod on node 1 reaches a Service whose endpoint is on node 3" bash -c "$(declare -f get K); BIN='$BIN' kc='$kc'; get srv-1 $svc 80 | grep -q '^srv-3 '"
check "a host-network pod has its node's address and name" expect "kstack-real-2 $ip3" get srv-3 10.245.0.2 18080
check "node 2's host paths are its own" bash -c "[ ! -e /run/kstack-netcheck-host-2 ] && [ ! -e /run/kstack-netcheck-srv-2 ] && [ -d /run/kstack-netcheck-srv-1 ]"

# Figures: start, and the memory of each node's own processes.
rss() { ps -o rss= -p "$(cat "$1" 2>/dev/null || echo 0)" 2>/dev/null | awk '{s+=$1} END {printf "%.0f", s/1024}'; }
mem1=$(( $(rss "$T/dev/real/pids/kubelet") + $(rss "$T/dev/real/pids/containerd") + $(rss "$T/dev/real/pids/kube-proxy") ))
mem2=$(( $(rss "$T/dev/real-2/pids/kubelet") + $(rss "$T/dev/real-2/pids/containerd") + $(rss "$T/dev/real-2/pids/kube-proxy") ))
echo "figures: control plane and 3 real nodes up in ${up_s}s ($(grep -o 'kstack-real-[0-9] Ready in [0-9]*s' "$T/up.log" | tr '\n' ',' | sed 's/,$//')); kubelet+containerd+kube-proxy: node 1 ${mem1} MiB, node 2 ${mem2} MiB"

# Shrinking: nodes 2 and 3 go, with their Node objects, namespaces and links.
K delete pod srv-2 srv-3 host-2 --wait=false >/dev/null 2>&1
bash hack/devcluster.sh up --real-nodes 1 >/dev/null 2>"$T/shrink.log"
shrunk() {
  local nodes; nodes=$(K get nodes -o name)
  [ "$nodes" = node/kstack-real-1 ] || { echo "nodes: $nodes"; return 1; }
  ! ip netns list | grep kstack-real- || { echo "namespaces left"; return 1; }
  ! ip -o link show | grep -E 'kstack-(n|t|x)[23]' || { echo "links left"; return 1; }
  ! ls -d /sys/fs/cgroup/*/kstack-real-[23] /sys/fs/cgroup/kstack-real-[23] 2>/dev/null || { echo "cgroups left"; return 1; }
}
check "the cluster shrinks to one real node" shrunk
check "node 1's pods kept running" expect "srv-1 $ip1" get srv-1 "$ip1" 8080

bash hack/devcluster.sh down --purge >/dev/null 2>&1
purged() {
  ! pgrep -af "$T/dev" || { echo "processes left"; return 1; }
  ! ip -o link show | grep -E 'kstack0|kstack-tunnel' || { echo "links left"; return 1; }
}
check "a purge leaves no process, namespace or link" purged
rm -rf /run/kstack-netcheck-srv-1

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
