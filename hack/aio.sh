#!/usr/bin/env bash
# The all-in-one job: installs what the real node needs (Debian packages), builds the cloud's
# images to Kolla's contract (hack/images.sh, cached) while the control plane binaries and
# kstack build, brings up the local cluster with one real node (no simulated nodes), prepares a
# config directory (starter globals.yml pointed at the local images, with the settings of a
# machine without KVM or the OVS kernel module; generated passwords; unless one exists), checks
# it, deploys the cloud with `kstack deploy` (dependency
# order, every step gated on real health), prints `kstack status` and ends with `kstack verify`
# (a user's scenario against the deployed APIs, with a real guest: hack/guest.sh's image boots,
# gets its lease and metadata, and is logged in to over SSH at a floating IP of a scratch
# provider network on the real node's external interface).
# Everything that waits on nothing else starts at once: the images, the control plane and node
# binaries (Go), the guest image and kstack (Rust) build side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/deps.sh
logs=${KSTACK_AIO_LOGS:-$HOME/.cache/kstack/aio}
mkdir -p "$logs"
started=$SECONDS
say() { echo "aio [$((SECONDS - started))s]: $*" >&2; }
# Waits for a background build, saying what it waits for and how far that build is: its log's
# last line, every 2 s in place on a terminal, every 30 s as a new line otherwise (a CI log).
# Returns the build's exit status.
waiting() {
  local what=$1 pid=$2 log=$3 since=$SECONDS every=30 next=0 line
  [ -t 2 ] && every=2
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$next" ]; then
      next=$((SECONDS + every))
      line=$(tail -n 1 "$log" 2>/dev/null | tr -d '\r' | cut -c1-90)
      line="aio [$((SECONDS - started))s]: waiting $((SECONDS - since))s for $what: ${line:-started}"
      if [ -t 2 ]; then printf '\r\033[K%s' "$line" >&2; else echo "$line" >&2; fi
    fi
    sleep 1
  done
  if [ -t 2 ]; then printf '\r\033[K' >&2; fi
  wait "$pid"
}
# The image build is mostly package installs and disk: it overlaps the compilers.
bash hack/images.sh >"$logs/images.log" 2>&1 &
images_pid=$!
# The control plane's binaries; `kstack dev up` below waits for this build (a lock) and uses it.
bash hack/build-k8s.sh >"$logs/k8s.log" 2>&1 &
k8s_pid=$!
bash hack/guest.sh >"$logs/guest.log" 2>&1 &
guest_pid=$!
say "building the images, the control plane (Go), the guest image and kstack (Rust) side by side; logs in $logs"
# On a terminal cargo shows its own progress bar; in a log, only errors.
if [ -t 2 ]; then cargo build --bin kstack; else cargo build -q --bin kstack; fi
say "kstack built"
# kstack's dev commands run this checkout's hack/ scripts (a binary in a shared target
# directory may have been compiled in another checkout).
export KSTACK_HACK_DIR=$PWD/hack
KSTACK=$PWD/target/debug/kstack
[ -n "${CARGO_TARGET_DIR:-}" ] && KSTACK=$CARGO_TARGET_DIR/debug/kstack
export KSTACK_CONFIG_DIR=${KSTACK_CONFIG_DIR:-$HOME/.config/kstack}
if ! waiting "the control plane's build (Go)" "$k8s_pid" "$logs/k8s.log"; then
  echo "building the control plane failed; last lines of $logs/k8s.log:" >&2
  tail -n 30 "$logs/k8s.log" >&2
  exit 1
fi
say "control plane built"
KUBECONFIG=$("$KSTACK" dev up --nodes none)
export KUBECONFIG
echo "kubeconfig: $KUBECONFIG" >&2
if ! waiting "the images (hack/images.sh, log $logs/images.log)" "$images_pid" "$logs/images.log"; then
  echo "building the images failed; last lines of $logs/images.log:" >&2
  tail -n 30 "$logs/images.log" >&2
  exit 1
fi
say "images built"
"$KSTACK" dev import "$(tail -n 1 "$logs/images.log")"
if [ ! -f "$KSTACK_CONFIG_DIR/globals.yml" ]; then
  "$KSTACK" init "$KSTACK_CONFIG_DIR"
  # The images hack/images.sh built, and the real node's volumes.
  cat >>"$KSTACK_CONFIG_DIR/globals.yml" <<'G'

# Local images built by hack/images.sh, and the dev cluster's real-node volumes.
kolla_base_distro: debian
docker_registry: kstack.local
docker_namespace: kolla
kstack_storage_class: kstack-real-node
# What this machine lacks: KVM (QEMU emulates the guests), the Open vSwitch kernel module
# (userspace datapath), CAP_SYS_RESOURCE (QEMU keeps the limits it inherits).
nova_compute_virt_type: qemu
ovs_datapath: netdev
qemu_max_files: 0
qemu_max_processes: 0
# Every container's log in one store as well (query it at victoria-logs:9428/select/vmui).
enable_central_logging: "yes"
# The real node's stand-in for an uplink NIC (hack/realnode.sh): the other end has 172.24.4.1/24.
neutron_external_interface: kstack-ext0
# The provider network on it (public1), for routers' gateways and floating IPs this machine
# reaches.
kstack_external_network: "yes"
kstack_external_network_cidr: 172.24.4.0/24
# The cloud's public address: this machine's end of that network. The public endpoints are
# there, published by HAProxy (its Service answers on it), over HTTPS with a certificate of
# kstack's own CA (`kstack openrc` writes that CA beside the openrc, for the clients).
kolla_external_vip_address: 172.24.4.1
kolla_enable_tls_external: "yes"
G
fi
"$KSTACK" genpwd
"$KSTACK" validate
"$KSTACK" services
say "deploying"
"$KSTACK" deploy
"$KSTACK" status
if ! waiting "the guest image (hack/guest.sh)" "$guest_pid" "$logs/guest.log"; then
  echo "building the guest image failed; last lines of $logs/guest.log:" >&2
  tail -n 30 "$logs/guest.log" >&2
  exit 1
fi
say "verifying"
"$KSTACK" verify --guest-image "$(tail -n 1 "$logs/guest.log")" --external-subnet 172.24.4.0/24
# The admin's admin-openrc.sh and clouds.yaml (and the CA of HTTPS endpoints) for the clients.
"$KSTACK" openrc
say "done"
