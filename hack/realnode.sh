#!/usr/bin/env bash
# The dev cluster's real node: containerd, a kubelet and kube-proxy on this machine, joined to
# the local control plane, so pods run as real processes in real containers beside the kwok
# nodes. Also CoreDNS (Service names for pods) and hostPath volumes for claims.
#
#   realnode.sh up BIN_DIR ROLE_PREFIX [N] (called by devcluster.sh once the API server is up;
#                                           N real nodes, 1 to 3, default 1)
#   realnode.sh down                       (stops everything and removes what it made)
#   realnode.sh preflight                  (says what is missing on this machine, exit 1 if any)
#   realnode.sh import DIR...              (imports hack/images.sh archives into its containerd)
#
# Env from devcluster.sh: KSTACK_DEV_DIR, KSTACK_DEV_PORT_BASE. Node facts:
#   node name kstack-real-1, node IP 10.245.0.1 on the bridge kstack0 (routed nowhere else),
#   pods 10.245.0.0/24 (CNI bridge + host-local + portmap), Service CIDR 10.96.0.0/16 routed to
#   the bridge, cluster DNS 10.245.0.1:53 (CoreDNS), kubelet on 10.245.0.1:BASE+6, the API
#   server for pods at 10.245.0.1:BASE (the `kubernetes` Service's endpoint).
# One dev cluster's real nodes per machine: node 1's kube-proxy chains and the bridge are
#   machine-wide.
# Nodes 2 and 3 (`up ... N`): kstack-real-I in a network namespace of its own (kstack-real-I)
#   whose eth0 (10.245.0.I) is a port of the bridge, and a mount namespace of its own in which
#   /run, /sys, /var/lib/kstack, /var/lib/cni, /var/log/pods and /var/log/containers are the node's (so the cloud's host paths,
#   /run/openvswitch or /var/lib/kstack/nova, are per node as on separate machines); its own
#   containerd (image store $CACHE/containerd-real-I), kubelet (cgroup root /kstack-real-I) and
#   kube-proxy; pods 10.245.I.0/24 on a bridge inside the node, routed by this machine. Node
#   labels: alone, node 1 has every role; with more nodes, node 1 has control, network,
#   storage and compute, and the others compute (N=2), or node 1 control and storage, node 2
#   network and compute, node 3 compute (N=3).
# The provider (external) network's uplink: a veth pair, kstack-ext0 for Open vSwitch (set
#   `neutron_external_interface: kstack-ext0`; br-ex takes it) and kstack-ext1 on this machine
#   with 172.24.4.1/24, so the floating IPs of a flat provider network on physnet1 with the
#   subnet 172.24.4.0/24 (gateway 172.24.4.1) are reachable from here, as a public network is
#   from outside a real cloud.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${KSTACK_DEV_DIR:-$HOME/.cache/kstack/dev}
BASE=${KSTACK_DEV_PORT_BASE:-16440}
CACHE=${KSTACK_CACHE_DIR:-$HOME/.cache/kstack}
R=$DIR/real
NODE=kstack-real-1
BRIDGE=kstack0
NODE_IP=10.245.0.1
POD_CIDR=10.245.0.0/24
# Pods of node 1 from .16 on: 10.245.0.2 and .3 are the other real nodes' addresses.
POD_RANGE_START=10.245.0.16
MAX_REAL_NODES=3
EXT_PORT=kstack-ext0 EXT_HOST=kstack-ext1 EXT_IP=172.24.4.1/24
# The tenant networks' tunnel network, a switch of its own (no address on this machine): each
# real node I has the interface kstack-tun with 10.247.0.I/24 (set `tunnel_interface: kstack-tun`),
# a veth whose other end, kstack-tI, is a port of the bridge kstack-tunnel.
TUN_BRIDGE=kstack-tunnel TUN_PORT=kstack-tun
tunnel_ip() { echo "10.247.0.$1/24"; }
SVC_CIDR=10.96.0.0/16
KUBELET_PORT=$((BASE + 6)) KUBELET_HEALTHZ=$((BASE + 7)) PROXY_HEALTHZ=$((BASE + 8)) PROXY_METRICS=$((BASE + 9)) DNS_HEALTH=$((BASE + 10))
# The containerd binary: Debian's by default, or another build ($KSTACK_CONTAINERD).
CONTAINERD=${KSTACK_CONTAINERD:-containerd}
SOCK=/run/kstack-containerd/containerd.sock
CTR_STATE=/run/kstack-containerd
# Images survive `down` (the cache), everything else does not.
CTR_ROOT=$CACHE/containerd
PAUSE_REF=kstack.local/pause:3.10
OWNER_FILE=/run/kstack-real-node.owner
PROCS="coredns kube-proxy kubelet containerd"

say() { echo "kstack dev: $*" >&2; }
die() { say "$*"; exit 1; }
# shellcheck source=hack/pidfile.sh
. "$HERE/pidfile.sh"
# The process helpers act on one node's directory, ND: node 1's ($R) unless a caller sets ND to
# another node's ($XR, as `local ND=$XR` or `ND=$XR helper ...`); that node's processes start in
# its namespaces (through its anchor process).
ND=$R
pid_of() { pid_in "$ND/pids/$1"; }
alive() { [ -n "$(pid_of "$1")" ]; }
node_label() { [ "$ND" = "$R" ] || echo "$XNODE: "; }

preflight() {
  local missing=() b
  command -v "$CONTAINERD" >/dev/null 2>&1 || missing+=("containerd ($CONTAINERD)")
  for b in runc ctr iptables ip gcc python3 mount umount; do
    command -v "$b" >/dev/null 2>&1 || missing+=("the '$b' command")
  done
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/portmap ] && [ -x /usr/lib/cni/loopback ] \
    || missing+=("the CNI plugins in /usr/lib/cni (bridge, host-local, portmap, loopback)")
  if [ ${#missing[@]} -gt 0 ]; then
    say "the real node cannot start; missing: ${missing[*]}."
    say "install them with: apt-get install -y containerd runc containernetworking-plugins iptables iproute2 gcc libc6-dev python3"
    say "(or start without a real node: kstack dev up --real-nodes 0)"
    return 1
  fi
  [ "$(id -u)" = 0 ] || { say "the real node needs root (it runs containerd and a kubelet); run as root or use --real-nodes 0"; return 1; }
  grep -qw overlay /proc/filesystems || { say "the real node needs the kernel's overlay filesystem (containerd's snapshotter); not in /proc/filesystems"; return 1; }
  for c in cpu memory pids; do
    [ -d "/sys/fs/cgroup/$c" ] || [ -f /sys/fs/cgroup/cgroup.controllers ] \
      || { say "the real node needs the '$c' cgroup controller; /sys/fs/cgroup/$c is missing"; return 1; }
  done
  if [ -f "$OWNER_FILE" ] && [ "$(cat "$OWNER_FILE")" != "$DIR" ] && [ -d "$(cat "$OWNER_FILE")/real/pids" ]; then
    local other; other=$(cat "$OWNER_FILE")
    for p in "$other"/real/pids/*; do
      [ -n "$(pid_in "$p")" ] && {
        say "another dev cluster's real node is running (state in $other); only one real node fits on a machine."
        say "stop it first: KSTACK_DEV_DIR=$other kstack dev down   (or start this one with --real-nodes 0)"
        return 1; }
    done
  fi
  if ip link show "$BRIDGE" >/dev/null 2>&1 && [ ! -f "$OWNER_FILE" ]; then
    say "the bridge $BRIDGE exists but no dev cluster owns it; remove it with: ip link delete $BRIDGE"; return 1
  fi
  # Listening sockets are read from the kernel, never probed by connecting: before the bridge
  # exists, the node IP is not on this machine.
  local p holder
  for p in 53 "$KUBELET_PORT"; do
    holder=$(ss -Hltnup 2>/dev/null | awk -v p=":$p" -v ip="$NODE_IP:" '$5 ~ p"$" && ($5 ~ "^(0.0.0.0|\\*|\\[::\\]|"ip")") {print $5, $7}' | head -1)
    if [ -n "$holder" ]; then
      say "port $NODE_IP:$p is already in use ($holder); stop what holds it (kstack dev down stops an earlier real node)"; return 1
    fi
  done
  return 0
}

# A certificate signed by the dev CA: cert NAME SUBJECT [EXTENSIONS]
cert() {
  local P=$DIR/pki n=$1 subj=$2 ext=${3:-extendedKeyUsage=clientAuth}
  [ -f "$P/$n.crt" ] && return 0
  openssl req -newkey rsa:2048 -nodes -keyout "$P/$n.key" -out "$P/$n.csr" -subj "$subj" 2>/dev/null
  openssl x509 -req -in "$P/$n.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 3650 -out "$P/$n.crt" \
    -extfile <(printf '%s\nkeyUsage=digitalSignature,keyEncipherment\nbasicConstraints=CA:FALSE' "$ext") 2>/dev/null
  rm -f "$P/$n.csr"
}

# kubeconfig_for CERT_NAME OUT [SERVER_IP]: SERVER_IP for a node in its own network namespace,
# where 127.0.0.1 is the node's own loopback (the API server's certificate names localhost).
kubeconfig_for() {
  local P=$DIR/pki server=${3:-127.0.0.1}
  cat >"$2" <<KC
apiVersion: v1
kind: Config
clusters:
- name: kstack-dev
  cluster: {server: "https://$server:$BASE", certificate-authority: "$P/ca.crt", tls-server-name: localhost}
users:
- name: u
  user: {client-certificate: "$P/$1.crt", client-key: "$P/$1.key"}
contexts:
- name: c
  context: {cluster: kstack-dev, user: u}
current-context: c
KC
  chmod 600 "$2"
}

start() { # start NAME COMMAND...
  local name=$1; shift
  [ "$ND" = "$R" ] || set -- nsenter -t "$(pid_of anchor)" -m -n -u -- "$@"
  "$@" >"$ND/logs/$name.log" 2>&1 &
  echo $! >"$ND/pids/$name"
}

wait_until() { # wait_until WHAT SECONDS PROC COMMAND...
  local what=$1 secs=$2 proc=$3; shift 3
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ -n "$proc" ] && ! alive "$proc"; then
      say "$(node_label)$proc exited while waiting for $what; last lines of $ND/logs/$proc.log:"
      tail -n 20 "$ND/logs/$proc.log" >&2 || true
      return 1
    fi
    [ $SECONDS -lt $deadline ] || { say "$(node_label)timed out after ${secs}s waiting for $what (logs in $ND/logs)"; return 1; }
    sleep 0.3
  done
}

network() {
  ip link add "$BRIDGE" type bridge 2>/dev/null || true
  ip addr replace "$NODE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # Service traffic stays on the bridge: nothing for 10.96/16 leaves through the machine's NIC.
  ip route replace "$SVC_CIDR" dev "$BRIDGE" src "$NODE_IP"
  sysctl -qw net.ipv4.ip_forward=1
  # Pods on the bridge reach Services through kube-proxy's rules only if bridged traffic
  # passes iptables.
  [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || modprobe br_netfilter 2>/dev/null || true
  if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
    sysctl -qw net.bridge.bridge-nf-call-iptables=1
  else
    say "warning: no bridge netfilter (br_netfilter) in this kernel: pods may not reach Services through kube-proxy"
  fi
  # dockerd sets the FORWARD policy to DROP; let the pod bridge forward.
  iptables -C FORWARD -i "$BRIDGE" -j ACCEPT -m comment --comment kstack-dev 2>/dev/null \
    || iptables -I FORWARD -i "$BRIDGE" -j ACCEPT -m comment --comment kstack-dev
  iptables -C FORWARD -o "$BRIDGE" -j ACCEPT -m comment --comment kstack-dev 2>/dev/null \
    || iptables -I FORWARD -o "$BRIDGE" -j ACCEPT -m comment --comment kstack-dev
  ip link show "$TUN_BRIDGE" >/dev/null 2>&1 || ip link add "$TUN_BRIDGE" type bridge
  ip link set "$TUN_BRIDGE" up
  iptables -C FORWARD -i "$TUN_BRIDGE" -j ACCEPT -m comment --comment kstack-dev 2>/dev/null \
    || iptables -I FORWARD -i "$TUN_BRIDGE" -j ACCEPT -m comment --comment kstack-dev
  ip link show "$TUN_PORT" >/dev/null 2>&1 || ip link add "$TUN_PORT" type veth peer name kstack-t1
  ip link set kstack-t1 master "$TUN_BRIDGE" up
  # (Open vSwitch may have moved the address onto its bridge br-vtep: then it stays there.)
  ip -4 addr show dev br-vtep 2>/dev/null | grep -q "inet $(tunnel_ip 1)" || ip addr replace "$(tunnel_ip 1)" dev "$TUN_PORT"
  ip link set "$TUN_PORT" up
  ip link show "$EXT_PORT" >/dev/null 2>&1 || ip link add "$EXT_PORT" type veth peer name "$EXT_HOST"
  ip addr replace "$EXT_IP" dev "$EXT_HOST"
  ip link set "$EXT_PORT" up
  ip link set "$EXT_HOST" up
  mkdir -p "$R/cni/net.d" "$R/cni/ipam"
  cat >"$R/cni/net.d/10-kstack.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "kstack",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "isDefaultGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$R/cni/ipam",
              "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP", "rangeStart": "$POD_RANGE_START"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
}

containerd_up() {
  mkdir -p "$CTR_ROOT" "$CTR_STATE"
  cat >"$R/containerd.toml" <<TOML
version = 2
root = "$CTR_ROOT"
state = "$CTR_STATE"
[grpc]
  address = "$SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_REF"
  # The VM lacks CAP_SYS_RESOURCE: without this every sandbox fails to start.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$R/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
TOML
  start containerd "$CONTAINERD" --config "$R/containerd.toml"
  wait_until "containerd" 30 containerd ctr -a "$SOCK" version
  # The socket answers before the CRI service has initialized, and a kubelet started in that
  # window exits at once ("server is not initialized yet"). containerd 1.6 and 1.7 log this line
  # right before the CRI service starts serving; kubelet_ready also restarts a kubelet that met
  # that window.
  wait_until "containerd's CRI service" 30 containerd grep -q "Start streaming server" "$R/logs/containerd.log" \
    || say "warning: containerd never logged that its CRI service started; going on"
}

pause_image() {
  ctr -a "$SOCK" -n k8s.io images ls -q | grep -qx "$PAUSE_REF" && return 0
  local w; w=$(mktemp -d)
  mkdir -p "$w/root"
  gcc -O2 -static -o "$w/root/pause" "$HERE/node/pause.c" || { rm -rf "$w"; die "building the pause image failed (gcc -static; install libc6-dev)"; }
  python3 "$HERE/node/image-archive.py" "$PAUSE_REF" "$w/root" "$w/pause.tar" /pause
  ctr -a "$SOCK" -n k8s.io images import "$w/pause.tar" >/dev/null
  rm -rf "$w"
}

# The ctr command of the node whose store an import fills (node 1's unless set).
CTR_CMD=(ctr -a "$SOCK")
# "REF DIGEST" of the archive's images as the node's containerd has them now, sorted.
archive_images_in_store() { # archive_images_in_store DIR
  "${CTR_CMD[@]}" -n k8s.io images ls 2>/dev/null | tail -n +2 \
    | awk 'NR == FNR { want[$1] = 1; next } ($1 in want) { print $1, $3 }' "$1/images.txt" - | sort
}

# Imports an image archive (hack/images.sh's output) unless the store still holds exactly what
# importing it gave: the marker (named by the directory, the hash of the images' inputs) keeps
# every image's digest, so images removed since (a full disk, a garbage collection) or tags
# moved by another archive are imported again.
import_images() { # import_images DIR_WITH_images.tar_AND_images.txt [STORE_ROOT NODE_NAME]
  local d=$1 root=${2:-$CTR_ROOT} name=${3:-the real node} mark
  [ -f "$d/images.tar" ] && [ -f "$d/images.txt" ] || die "no image archive in $d (build it with: kstack dev images)"
  mark=$root/kstack-imported/$(basename "$(cd "$d" && pwd)")
  if [ -f "$mark" ] && [ "$(archive_images_in_store "$d" | wc -l)" -eq "$(wc -l <"$d/images.txt")" ] \
      && archive_images_in_store "$d" | cmp -s - "$mark"; then
    return 0
  fi
  say "importing $(wc -l <"$d/images.txt") images from $d into $name's containerd"
  "${CTR_CMD[@]}" -n k8s.io images import "$d/images.tar" >/dev/null
  mkdir -p "$(dirname "$mark")" && archive_images_in_store "$d" >"$mark"
}

kubelet_up() {
  local P=$DIR/pki labels role
  cert "node-$NODE" "/O=system:nodes/CN=system:node:$NODE"
  kubeconfig_for "node-$NODE" "$R/kubelet.kubeconfig"
  mkdir -p "$R/kubelet"
  cat >"$R/kubelet.yaml" <<KY
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$P/ca.crt"}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
clusterDNS: [$NODE_IP]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
serializeImagePulls: false
# No registry is reachable: images are imported, never collected.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 200Mi, nodefs.available: 2%, imagefs.available: 2%, nodefs.inodesFree: 2%}
maxPods: 110
registerNode: true
KY
  labels="kubernetes.io/os=linux,kstack.io/real-node=true"
  for role in $(node_roles 1); do labels="$labels,${ROLE_PREFIX}$role=true"; done
  KUBELET_LABELS=$labels
  kubelet_start
}

kubelet_start() {
  start kubelet "$BIN/kubelet" --config="$R/kubelet.yaml" --kubeconfig="$R/kubelet.kubeconfig" \
    --root-dir="$R/kubelet" --hostname-override="$NODE" --node-ip="$NODE_IP" --node-labels="$KUBELET_LABELS" --v=1
}

# Waits for the node to be Ready. A kubelet that exited because containerd's CRI service was
# not initialized yet is started again (three times at most); any other exit fails.
kubelet_ready() {
  local tries=0 ready
  ready="'$BIN/kubectl' --kubeconfig='$DIR/kubeconfig' get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  until wait_until "node $NODE to be Ready" 120 kubelet bash -c "$ready"; do
    alive kubelet && return 1
    grep -q "server is not initialized yet" "$R/logs/kubelet.log" && [ $tries -lt 3 ] || return 1
    tries=$((tries + 1))
    say "containerd's CRI service was not ready yet; starting the kubelet again ($tries of 3)"
    sleep 2
    kubelet_start
  done
}

proxy_up() {
  cert kube-proxy "/CN=system:kube-proxy"
  kubeconfig_for kube-proxy "$R/kube-proxy.kubeconfig"
  cat >"$R/kube-proxy.yaml" <<KP
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$R/kube-proxy.kubeconfig"}
mode: iptables
hostnameOverride: $NODE
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ
metricsBindAddress: 127.0.0.1:$PROXY_METRICS
clusterCIDR: $POD_CIDR
nodePortAddresses: ["$NODE_IP/32"]
# Leave the kernel's conntrack table as it is (the VM may not allow changing it).
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
KP
  start kube-proxy "$BIN/kube-proxy" --config="$R/kube-proxy.yaml"
}

dns_up() {
  cat >"$R/Corefile" <<CF
.:53 {
    bind $NODE_IP
    errors
    health 127.0.0.1:$DNS_HEALTH
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $DIR/kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
CF
  start coredns "$BIN/coredns" -conf "$R/Corefile"
  wait_until "CoreDNS" 30 coredns curl -sf "http://127.0.0.1:$DNS_HEALTH/health"
}

# Pods reach the API server as in any cluster, through the `kubernetes` Service (10.96.0.1:443,
# a name in its certificate): the API server listens on every address of this machine, and its
# endpoint is the node IP (pods reach the host there). The dev API server runs with no endpoint
# reconciler, so the endpoint is written here; kube-proxy routes the Service to it.
api_endpoint() {
  cat <<EP | "$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" apply --server-side -f - >/dev/null
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes-real-node
  namespace: default
  labels: {kubernetes.io/service-name: kubernetes, endpointslice.kubernetes.io/managed-by: kstack-dev}
addressType: IPv4
endpoints: [{addresses: ["$NODE_IP"], conditions: {ready: true}}]
ports: [{name: https, port: $BASE, protocol: TCP}]
EP
}

# The volume pool of this cluster: a directory of its own (by its dev directory), so the claims
# of one dev cluster (the tests') never find data another one (the main job's) left behind.
pool_dir() { echo "/var/lib/kstack/volumes/$(printf %s "$DIR" | sha256sum | cut -c1-12)"; }

# What the cloud's services write on the host (the catalog's hostPath volumes under
# /var/lib/kstack: nova-compute's node identity, libvirt's and Open vSwitch's state, ...) belongs
# to the cloud of one dev cluster, whose etcd holds the records that match it. One real node runs
# on a machine at a time, but several dev clusters may keep their data (the main job's and the
# tests'): when another cluster's node comes up, the state of the last one is parked under
# /var/lib/kstack-parked/<its hash> and this cluster's own parked state, if any, is put back; a
# purge deletes only this cluster's state. (Without this, purging the tests' cluster deleted the
# main cloud's nova-compute identity, and its nova-compute refused to start.)
# (KSTACK_HOST_STATE and KSTACK_HOST_PARKED move both, for hack/test-devcluster-failures.sh.)
HOST_STATE=${KSTACK_HOST_STATE:-/var/lib/kstack}
HOST_PARKED=${KSTACK_HOST_PARKED:-/var/lib/kstack-parked}
HOST_STATE_OWNER=$HOST_STATE/.owner
parked_dir() { echo "$HOST_PARKED/$(printf %s "$1" | sha256sum | cut -c1-12)"; }
# The host state's entries (every one but the volume pools and the owner file).
host_state_entries() {
  find "$HOST_STATE" -mindepth 1 -maxdepth 1 ! -name volumes ! -name .owner 2>/dev/null || true
}
host_state_take() {
  local owner="" e parked
  mkdir -p "$HOST_STATE"
  [ -f "$HOST_STATE_OWNER" ] && owner=$(cat "$HOST_STATE_OWNER")
  [ "$owner" = "$DIR" ] && return 0
  if [ -n "$owner" ]; then
    parked=$(parked_dir "$owner")
    rm -rf "$parked" && mkdir -p "$parked"
    echo "$owner" >"$parked/.owner"
    for e in $(host_state_entries); do mv "$e" "$parked/"; done
    say "parked the host state of the dev cluster in $owner under $parked"
  fi
  parked=$(parked_dir "$DIR")
  if [ -d "$parked" ]; then
    for e in $(find "$parked" -mindepth 1 -maxdepth 1 ! -name .owner); do
      rm -rf "${HOST_STATE:?}/$(basename "$e")"
      mv "$e" "$HOST_STATE/"
    done
    rm -rf "$parked"
    rmdir "$HOST_PARKED" 2>/dev/null || true
    say "restored this cluster's parked host state"
  fi
  echo "$DIR" >"$HOST_STATE_OWNER"
}
# --purge: this cluster's host state, where it is (in place when it owns it, or parked).
host_state_purge() {
  local e
  if [ -f "$HOST_STATE_OWNER" ] && [ "$(cat "$HOST_STATE_OWNER")" = "$DIR" ]; then
    for e in $(host_state_entries); do rm -rf "$e"; done
    rm -f "$HOST_STATE_OWNER"
  elif [ ! -f "$HOST_STATE_OWNER" ]; then
    # State of the layout before owners: nobody's record says whose it is; as before, purged.
    for e in $(host_state_entries); do rm -rf "$e"; done
  fi
  rm -rf "$(parked_dir "$DIR")"
  rmdir "$HOST_PARKED" 2>/dev/null || true
}

# hostPath volumes on the real node for claims of the StorageClass kstack-real-node (static
# provisioning: the PV controller binds a claim to a free volume of the class). A volume the
# cluster already has keeps its path (a PV's path cannot change).
volumes() {
  local i n=${KSTACK_DEV_REAL_VOLUMES:-24} pool existing
  pool=$(pool_dir)
  existing=$("$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" get pv -o name 2>/dev/null || true)
  {
    cat <<SC
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: kstack-real-node}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
SC
    for ((i = 1; i <= n; i++)); do
      grep -qx "persistentvolume/kstack-real-node-$i" <<<"$existing" && continue
      cat <<PV
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: kstack-real-node-$i, labels: {kstack.io/real-node: "true"}}
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce, ReadWriteMany, ReadOnlyMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: kstack-real-node
  hostPath: {path: $pool/$i, type: DirectoryOrCreate}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$NODE]}]
PV
    done
  } | "$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" apply --server-side -f - >/dev/null
}

# ---- The roles of each real node, and nodes 2 and 3 ----

ALL_ROLES="control network storage compute"
# node_roles I: the role labels real node I carries among REAL_COUNT real nodes.
node_roles() {
  case "${REAL_COUNT:-1}:$1" in
    1:1) echo "$ALL_ROLES";;
    2:1) echo "control network storage compute";;
    2:2) echo "compute";;
    3:1) echo "control storage";;
    3:2) echo "network compute";;
    3:3) echo "compute";;
    *) die "no roles for real node $1 of ${REAL_COUNT:-1}";;
  esac
}

# Sets real node I's role labels to node_roles I, removing the others: a kubelet applies its
# --node-labels only when it registers, and a cluster restarted with another count keeps them.
label_roles() { # label_roles I
  local node=kstack-real-$1 role want args=()
  want=" $(node_roles "$1") "
  for role in $ALL_ROLES; do
    case "$want" in *" $role "*) args+=("${ROLE_PREFIX}$role=true");; *) args+=("${ROLE_PREFIX}$role-");; esac
  done
  "$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" label node "$node" --overwrite "${args[@]}" >/dev/null
}

# The facts of real node I (2 or 3), as globals the functions below read.
extra_node() { # extra_node I
  X=$1
  XNODE=kstack-real-$X
  XNS=kstack-real-$X
  XIP=10.245.0.$X
  XPOD_CIDR=10.245.$X.0/24
  XPOD_GW=10.245.$X.1
  XVETH=kstack-n$X
  XR=$DIR/real-$X
  XCTR_ROOT=$CACHE/containerd-real-$X
  XCTR_STATE=/run/kstack-containerd-$X
  XSOCK=$XCTR_STATE/containerd.sock
  XCGROUP=kstack-real-$X
  # The node's own /var/lib/kstack (its part of the cloud's host state, parked and purged with it).
  XSTATE=$HOST_STATE/nodes/$XNODE
}
# Runs a command in real node X's namespaces (network, mount and UTS, through its anchor process).
in_node() {
  local anchor; anchor=$(ND=$XR pid_of anchor)
  [ -n "$anchor" ] || die "real node $XNODE is not running"
  nsenter -t "$anchor" -m -n -u -- "$@"
}

# The node's network namespace on the bridge, its pods' route through it, and its anchor: a
# process holding the node's network, mount and UTS namespaces (its host name is the node's name:
# the cloud's host-network services name their host by it), in which the node's /sys shows its own
# network devices (the cgroup hierarchies kept), and /run, /var/lib/kstack, the kubelet's
# /var/log/pods and /var/log/containers and CNI's /var/lib/cni are the node's (a kubelet deletes
# the log links it cannot resolve: another node's). Every process of the node is started in the
# anchor's namespaces.
xnode_namespaces() {
  local ND=$XR
  ip netns add "$XNS" 2>/dev/null || true
  ip link show "$XVETH" >/dev/null 2>&1 || ip link add "$XVETH" type veth peer name eth0 netns "$XNS"
  ip link set "$XVETH" master "$BRIDGE" up
  ip -n "$XNS" addr replace "$XIP/24" dev eth0
  ip -n "$XNS" link set lo up
  ip -n "$XNS" link set eth0 up
  ip -n "$XNS" route replace default via "$NODE_IP"
  ip route replace "$XPOD_CIDR" via "$XIP" dev "$BRIDGE"
  # Its tunnel interface on the tunnel network, and an external interface without a cable (the
  # provider network's gateway is on node 1, as a network node's).
  ip link show "kstack-t$X" >/dev/null 2>&1 || ip link add "kstack-t$X" type veth peer name "$TUN_PORT" netns "$XNS"
  ip link set "kstack-t$X" master "$TUN_BRIDGE" up
  ip -n "$XNS" addr replace "$(tunnel_ip "$X")" dev "$TUN_PORT"
  ip -n "$XNS" link set "$TUN_PORT" up
  ip link show "kstack-x$X" >/dev/null 2>&1 || ip link add "kstack-x$X" type veth peer name "$EXT_PORT" netns "$XNS"
  ip link set "kstack-x$X" up
  ip -n "$XNS" link set "$EXT_PORT" up
  ip netns exec "$XNS" sysctl -qw net.ipv4.ip_forward=1
  [ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || ip netns exec "$XNS" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null \
    || say "warning: $XNODE: no bridge netfilter in its namespace: its pods may not reach Services"
  local g
  for g in /sys/fs/cgroup/*/; do
    [ -d "$g$XCGROUP" ] && continue
    mkdir "$g$XCGROUP"
    # A v1 cpuset group takes no task until it has CPUs and memory nodes.
    if [ -f "$g/cpuset.cpus" ]; then cat "$g/cpuset.cpus" >"$g$XCGROUP/cpuset.cpus"; cat "$g/cpuset.mems" >"$g$XCGROUP/cpuset.mems"; fi
  done
  mkdir -p "$XR/logs" "$XR/pids" "$XR/pod-logs" "$XR/container-logs" "$XR/cni-cache" "$XR/mnt/cgroup" "$XSTATE" /var/log/containers
  rm -f "$XR/anchor.ready"
  nsenter --net="/run/netns/$XNS" unshare --mount --uts --propagation slave -- bash -c '
    set -e
    hostname "$3"
    mount --rbind /sys/fs/cgroup "$1/mnt/cgroup"
    umount -l /sys
    mount -t sysfs sysfs /sys
    mount --move "$1/mnt/cgroup" /sys/fs/cgroup
    mount -t tmpfs -o mode=0755 tmpfs /run
    mkdir -p /run/netns
    mount --bind /run/netns /run/netns
    mount --make-shared /run/netns
    mount --bind "$1/pod-logs" /var/log/pods
    mount --bind "$1/container-logs" /var/log/containers
    mkdir -p /var/lib/cni
    mount --bind "$1/cni-cache" /var/lib/cni
    mkdir -p /var/lib/kstack
    mount --bind "$2" /var/lib/kstack
    touch "$1/anchor.ready"
    exec sleep infinity' anchor "$XR" "$XSTATE" "$XNODE" >"$XR/logs/anchor.log" 2>&1 &
  echo $! >"$XR/pids/anchor"
  wait_until "its namespaces" 10 anchor test -f "$XR/anchor.ready"
}

xnode_containerd() {
  local ND=$XR
  mkdir -p "$XCTR_ROOT" "$XR/cni/net.d" "$XR/cni/ipam"
  cat >"$XR/cni/net.d/10-kstack.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "kstack",
  "plugins": [
    {"type": "bridge", "bridge": "kstack-pods", "isGateway": true, "isDefaultGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$XR/cni/ipam",
              "ranges": [[{"subnet": "$XPOD_CIDR", "gateway": "$XPOD_GW"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
  sed -e "s|^root = .*|root = \"$XCTR_ROOT\"|" -e "s|^state = .*|state = \"$XCTR_STATE\"|" \
      -e "s|address = .*|address = \"$XSOCK\"|" -e "s|conf_dir = .*|conf_dir = \"$XR/cni/net.d\"|" \
      "$R/containerd.toml" >"$XR/containerd.toml"
  start containerd "$CONTAINERD" --config "$XR/containerd.toml"
  wait_until "containerd" 30 containerd in_node ctr -a "$XSOCK" version
  wait_until "containerd's CRI service" 30 containerd grep -q "Start streaming server" "$XR/logs/containerd.log" \
    || say "warning: $XNODE: containerd never logged that its CRI service started; going on"
  # The pause image, as node 1's containerd has it.
  if ! in_node ctr -a "$XSOCK" -n k8s.io images ls -q | grep -qx "$PAUSE_REF"; then
    ctr -a "$SOCK" -n k8s.io images export "$XR/pause.tar" "$PAUSE_REF"
    in_node ctr -a "$XSOCK" -n k8s.io images import "$XR/pause.tar" >/dev/null
    rm -f "$XR/pause.tar"
  fi
}

xnode_kubelet() {
  local ND=$XR
  local P=$DIR/pki labels role
  cert "node-$XNODE" "/O=system:nodes/CN=system:node:$XNODE"
  kubeconfig_for "node-$XNODE" "$XR/kubelet.kubeconfig" "$NODE_IP"
  mkdir -p "$XR/kubelet"
  sed -e "s|^address: .*|address: $XIP|" -e "s|^containerRuntimeEndpoint: .*|containerRuntimeEndpoint: unix://$XSOCK|" \
      "$R/kubelet.yaml" >"$XR/kubelet.yaml"
  echo "cgroupRoot: /$XCGROUP" >>"$XR/kubelet.yaml"
  labels="kubernetes.io/os=linux,kstack.io/real-node=true"
  for role in $(node_roles "$X"); do labels="$labels,${ROLE_PREFIX}$role=true"; done
  start kubelet "$BIN/kubelet" --config="$XR/kubelet.yaml" --kubeconfig="$XR/kubelet.kubeconfig" \
    --root-dir="$XR/kubelet" --hostname-override="$XNODE" --node-ip="$XIP" --node-labels="$labels" --v=1
}

xnode_proxy() {
  local ND=$XR
  kubeconfig_for kube-proxy "$XR/kube-proxy.kubeconfig" "$NODE_IP"
  sed -e "s|^clientConnection: .*|clientConnection: {kubeconfig: \"$XR/kube-proxy.kubeconfig\"}|" \
      -e "s|^hostnameOverride: .*|hostnameOverride: $XNODE|" -e "s|^bindAddress: .*|bindAddress: $XIP|" \
      -e "s|^clusterCIDR: .*|clusterCIDR: 10.245.0.0/16|" -e "s|^nodePortAddresses: .*|nodePortAddresses: [\"$XIP/32\"]|" \
      "$R/kube-proxy.yaml" >"$XR/kube-proxy.yaml"
  start kube-proxy "$BIN/kube-proxy" --config="$XR/kube-proxy.yaml"
}

xnode_up() { # xnode_up I
  extra_node "$1"
  local t0=$SECONDS ND=$XR
  if alive kubelet && alive containerd && alive kube-proxy; then return 0; fi
  xnode_down
  extra_node "$1"
  xnode_namespaces
  xnode_containerd
  local d
  for d in ${KSTACK_DEV_IMAGES:-}; do xnode_import "$d"; done
  xnode_kubelet
  xnode_proxy
  wait_until "node $XNODE to be Ready" 120 kubelet bash -c \
    "'$BIN/kubectl' --kubeconfig='$DIR/kubeconfig' get node $XNODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  say "real node $XNODE Ready in $((SECONDS - t0))s (node IP $XIP, pods $XPOD_CIDR, roles: $(node_roles "$X"))"
}

xnode_import() { # xnode_import DIR (into real node X)
  local CTR_CMD=(in_node ctr -a "$XSOCK")
  import_images "$1" "$XCTR_ROOT" "$XNODE"
}

# Stops real node X: its daemons, then every process left in its mount namespace (pods' shims
# and containers, guests), so the namespaces and every mount in them go; then its network
# namespace, route and cgroups. Its image store and its host state stay.
xnode_down() {
  local ND=$XR
  [ -d "$XR" ] || ip netns list 2>/dev/null | grep -qw "$XNS" || return 0
  local anchor p
  anchor=$(pid_of anchor)
  stop_pid_in "$XR/pids/kubelet" 5
  stop_pid_in "$XR/pids/kube-proxy" 5
  if [ -n "$anchor" ]; then
    for p in /proc/[0-9]*; do
      if [[ "$p/ns/mnt" -ef "/proc/$anchor/ns/mnt" ]] && [ "${p#/proc/}" != "$anchor" ]; then kill -9 "${p#/proc/}" 2>/dev/null || true; fi
    done
  fi
  stop_pid_in "$XR/pids/containerd" 5
  stop_pid_in "$XR/pids/anchor" 2
  ip netns delete "$XNS" 2>/dev/null || true
  ip link delete "$XVETH" 2>/dev/null || true
  ip link delete "kstack-t$X" 2>/dev/null || true
  ip link delete "kstack-x$X" 2>/dev/null || true
  ip route del "$XPOD_CIDR" 2>/dev/null || true
  local g
  for g in /sys/fs/cgroup/*/"$XCGROUP"; do
    [ -d "$g" ] && find "$g" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  rm -rf "$XR"
}

# The real nodes 2.. this cluster has running (from their directories).
extra_nodes_present() {
  local d
  for d in "$DIR"/real-[0-9]; do [ -d "$d" ] && echo "${d##*-}"; done
  return 0
}

cmd_up() {
  BIN=$1 ROLE_PREFIX=$2 REAL_COUNT=${3:-1}
  case "$REAL_COUNT" in [1-$MAX_REAL_NODES]) ;; *) die "at most $MAX_REAL_NODES real nodes fit on this machine, asked for '$REAL_COUNT'";; esac
  # Node 1 already running (the cluster grows or shrinks): only the other nodes change.
  if node1_running; then
    local i
    extra_nodes_adjust
    return 0
  fi
  preflight || exit 1
  [ -x "$BIN/kubelet" ] && [ -x "$BIN/kube-proxy" ] && [ -x "$BIN/coredns" ] || die "kubelet, kube-proxy or coredns missing in $BIN (hack/build-k8s.sh builds them)"
  mkdir -p "$R/logs" "$R/pids"
  echo "$DIR" >"$OWNER_FILE"
  host_state_take
  trap 'say "the real node did not start; stopping it"; cmd_down; exit 1' ERR INT TERM
  local t0=$SECONDS
  netns_shared
  network
  containerd_up
  pause_image
  local d
  for d in ${KSTACK_DEV_IMAGES:-}; do import_images "$d"; done
  dns_up
  kubelet_up
  proxy_up
  api_endpoint
  volumes
  kubelet_ready
  say "real node $NODE Ready in $((SECONDS - t0))s (node IP $NODE_IP, roles ${ROLE_PREFIX}*: $(node_roles 1); logs in $R/logs)"
  extra_nodes_adjust
  trap - ERR INT TERM
}

# Nodes 2..REAL_COUNT up (those running are left alone); nodes beyond the count asked for (a
# cluster started again with fewer) go, with their Node objects; every node's role labels set.
extra_nodes_adjust() {
  local i
  for i in $(extra_nodes_present); do
    [ "$i" -le "$REAL_COUNT" ] && continue
    extra_node "$i"; xnode_down
    "$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" delete node "$XNODE" --ignore-not-found >/dev/null
    say "real node $XNODE stopped and removed from the cluster"
  done
  for ((i = 2; i <= REAL_COUNT; i++)); do xnode_up "$i"; label_roles "$i"; done
  label_roles 1
  echo "$REAL_COUNT" >"$R/count"
}

node1_running() {
  local c
  [ -d "$R/pids" ] || return 1
  for c in $PROCS; do alive "$c" || return 1; done
}

stop_proc() { stop_pid_in "$R/pids/$1" 5; }

# Neutron's agents mount their network namespaces under /run/netns with propagation both ways
# (the catalog's `shared` volume: a pod's mountPropagation Bidirectional, a Compose bind's
# propagation shared), so a namespace outlives the container that made it and the agent's next
# container finds it. Both need the host's /run/netns to be a shared mount, as `ip netns` makes
# it (systemd makes / shared; this machine's / is private).
netns_shared() {
  mkdir -p /run/netns
  mountpoint -q /run/netns || mount --bind /run/netns /run/netns
  mount --make-shared /run/netns
}

# libvirtd and virtlogd run outside their container's cgroup, in the cgroup kstack-libvirt
# (nova-libvirt's start script puts them there so that the guests outlive the container): a
# container stopped in order stops them itself, but one killed with its node (or a Compose
# container killed) leaves them running. Everything in that cgroup goes, in every hierarchy.
libvirt_leftovers_stop() {
  local group=${KSTACK_LIBVIRT_CGROUP:-kstack-libvirt} f
  for f in /sys/fs/cgroup/"$group"/cgroup.procs /sys/fs/cgroup/*/"$group"/cgroup.procs; do
    [ -f "$f" ] || continue
    xargs -r kill -9 <"$f" 2>/dev/null || true
  done
  return 0
}

# What the cloud's host-network services leave in the machine's namespaces, on this target or
# the single node's (hack/docker.sh down): guests that libvirtd started (they outlive its
# container), Open vSwitch's userspace-datapath devices, neutron's router and DHCP namespaces
# and their veth ends.
host_leftovers_clean() {
  pkill -9 -f '^/usr/bin/qemu-system-[^ ]* .*-name guest=instance-' 2>/dev/null || true
  libvirt_leftovers_stop
  local l m
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 \
      | grep -E '^(ovs-netdev|ovs-system|br-int|br-tun|br-vtep|br-ex[0-9]*|tap[0-9a-f]{8}-[0-9a-f]{2}|qr-|qg-|ns-|qvo|qvb|qbr)' || true); do
    ip link delete "$l" 2>/dev/null || true
  done
  for m in /run/netns/qrouter-* /run/netns/qdhcp-*; do [ -e "$m" ] && { ip netns delete "$(basename "$m")" 2>/dev/null || rm -f "$m"; }; done
  return 0
}

cmd_down() {
  local i
  for i in $(extra_nodes_present); do extra_node "$i"; xnode_down; done
  [ -d "$R" ] || [ -f "$OWNER_FILE" ] || return 0
  if [ -f "$OWNER_FILE" ] && [ "$(cat "$OWNER_FILE")" != "$DIR" ]; then return 0; fi
  stop_proc kubelet
  stop_proc kube-proxy
  stop_proc coredns
  # The pods' containers: their shims outlive containerd, so kill them by the socket they use.
  local pids
  pids=$(pgrep -f "containerd-shim-runc-v2 -namespace k8s.io .*-address $SOCK" || true)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    for p in $pids; do pkill -9 -P "$p" 2>/dev/null || true; done
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
  fi
  stop_proc containerd
  host_leftovers_clean
  local m
  # Everything mounted under the node's state: pod volumes, container rootfs, netns.
  for _ in 1 2 3; do
    for m in $(awk -v r="$R" -v s="$CTR_STATE" -v c="$CTR_ROOT" '$2 ~ "^("r"|"s"|"c"|/run/netns/cni-|/var/lib/kstack)" {print $2}' /proc/mounts | sort -r); do
      umount -l "$m" 2>/dev/null || true
    done
  done
  for m in /run/netns/cni-*; do [ -e "$m" ] && { ip netns delete "$(basename "$m")" 2>/dev/null || rm -f "$m"; }; done
  # kube-proxy's rules and ours.
  if [ -x "${BIN:-}/kube-proxy" ]; then "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
  local t c
  for t in filter nat mangle; do
    for c in $(iptables -t "$t" -S 2>/dev/null | awk '/^-N (KUBE-|CNI-)/ {print $2}'); do iptables -t "$t" -F "$c" 2>/dev/null || true; done
    while read -r rule; do
      [ -n "$rule" ] && eval "iptables -t $t ${rule/-A /-D }" 2>/dev/null || true
    done < <(iptables -t "$t" -S 2>/dev/null | grep -E -- '-j (KUBE-|CNI-)|kstack-dev' || true)
    for c in $(iptables -t "$t" -S 2>/dev/null | awk '/^-N (KUBE-|CNI-)/ {print $2}'); do iptables -t "$t" -X "$c" 2>/dev/null || true; done
  done
  ip route del "$SVC_CIDR" dev "$BRIDGE" 2>/dev/null || true
  for m in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do ip link delete "$m" 2>/dev/null || true; done
  ip link delete "$BRIDGE" 2>/dev/null || true
  ip link delete "$EXT_PORT" 2>/dev/null || true
  ip link delete "$TUN_PORT" 2>/dev/null || true
  ip link delete "$TUN_BRIDGE" 2>/dev/null || true
  # The volumes' data stays for the next `up` (the cluster's data in etcd points at it) unless
  # asked to purge; the image store under the cache always stays.
  rm -rf "$R" "$CTR_STATE" /run/openvswitch
  # Purging deletes this cluster's volume pool and what the services wrote on the host, not the
  # pools of other dev clusters.
  if [ "${1:-}" = --purge ]; then
    # (directories right under volumes/ named by a number alone are the pool of the layout
    # before per-cluster pools, which every cluster shared; a pool's hash may start with a
    # digit too, and another cluster's pool is not this one's to delete)
    rm -rf "$(pool_dir)" /run/openvswitch
    find /var/lib/kstack/volumes -mindepth 1 -maxdepth 1 -regextype posix-extended \
      -regex '.*/[0-9]+' -exec rm -rf {} + 2>/dev/null || true
    host_state_purge
    rmdir /var/lib/kstack/volumes /var/lib/kstack 2>/dev/null || true
  fi
  rm -f "$OWNER_FILE"
}

cmd_status() {
  local c rc=0
  if [ ! -d "$R/pids" ]; then printf '%-24s not running\n' "real node"; return 3; fi
  for c in $PROCS; do
    if alive "$c"; then printf '%-24s running (pid %s)\n' "$c" "$(pid_of "$c")"; else printf '%-24s stopped\n' "$c"; rc=3; fi
  done
  local i count
  count=$(cat "$R/count" 2>/dev/null || echo 1)
  for ((i = 2; i <= count; i++)); do
    extra_node "$i"
    for c in containerd kubelet kube-proxy; do
      if ND=$XR alive "$c"; then printf '%-24s running (pid %s)\n' "$XNODE $c" "$(ND=$XR pid_of "$c")"; else printf '%-24s stopped\n' "$XNODE $c"; rc=3; fi
    done
  done
  return $rc
}

case "${1:-}" in
  up) shift; cmd_up "$@";;
  down) BIN=$(dirname "$(ls "$CACHE"/bin/*/kube-proxy 2>/dev/null | head -1)"); cmd_down "${2:-}";;
  status) cmd_status;;
  # The number of real nodes running now (node 1 and the others), 0 when node 1 is down.
  count) if node1_running; then cat "$R/count" 2>/dev/null || echo 1; else echo 0; fi;;
  preflight) preflight;;
  # What `up` and `down --purge` do to the host state, alone (for the tests).
  host-state) case "${2:-}" in take) host_state_take;; purge) host_state_purge;; clean-leftovers) host_leftovers_clean;; libvirt-leftovers) libvirt_leftovers_stop;; netns-shared) netns_shared;; *) die "usage: realnode.sh host-state take|purge|clean-leftovers|libvirt-leftovers|netns-shared";; esac;;
  import) shift; [ $# -gt 0 ] || die "usage: realnode.sh import DIR..."
    alive containerd || die "the real node is not running (kstack dev up starts it)"
    for d in "$@"; do import_images "$d"; done
    for i in $(extra_nodes_present); do
      extra_node "$i"
      ND=$XR alive containerd || die "real node $XNODE is not running (kstack dev up starts it)"
      for d in "$@"; do xnode_import "$d"; done
    done;;
  *) die "usage: realnode.sh up BIN_DIR ROLE_PREFIX [N] | down | status | preflight | import DIR...";;
esac
