#!/usr/bin/env bash
# The all-in-one job: installs what the real node needs (Debian packages), builds the cloud's
# images to Kolla's contract (hack/images.sh, cached) while the control plane binaries and
# kstack build, brings up the local cluster with one real node (no simulated nodes), prepares a
# config directory (starter globals.yml pointed at the local images, with the settings of a
# machine without KVM or the OVS kernel module; generated passwords; unless one exists), checks
# it, deploys the cloud with `kstack deploy` (dependency
# order, every step gated on real health), prints `kstack status` and ends with `kstack verify`
# (a user's scenario against the deployed APIs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/deps.sh
logs=${KSTACK_AIO_LOGS:-$HOME/.cache/kstack/aio}
mkdir -p "$logs"
# The image build is mostly package installs and disk: it overlaps the compilers.
bash hack/images.sh >"$logs/images.log" 2>&1 &
images_pid=$!
cargo build -q --bin kstack
KSTACK=$PWD/target/debug/kstack
[ -n "${CARGO_TARGET_DIR:-}" ] && KSTACK=$CARGO_TARGET_DIR/debug/kstack
export KSTACK_CONFIG_DIR=${KSTACK_CONFIG_DIR:-$HOME/.config/kstack}
KUBECONFIG=$("$KSTACK" dev up --nodes none)
export KUBECONFIG
echo "kubeconfig: $KUBECONFIG" >&2
if ! wait "$images_pid"; then
  echo "building the images failed; last lines of $logs/images.log:" >&2
  tail -n 30 "$logs/images.log" >&2
  exit 1
fi
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
G
fi
"$KSTACK" genpwd
"$KSTACK" validate
"$KSTACK" services
"$KSTACK" deploy
"$KSTACK" status
"$KSTACK" verify
