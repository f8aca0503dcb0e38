#!/usr/bin/env bash
# A small Ceph cluster on this machine, standing in for the external Ceph cluster an operator
# gives Cinder (`cinder_backend_ceph`): one monitor and one OSD, run as host processes from
# Debian's Ceph packages, listening on one address.
#
#   hack/ceph.sh up ADDRESS          start it on ADDRESS (e.g. the dev cluster's real node,
#                                    10.245.0.1); creates the pool `volumes` and the client
#                                    `client.cinder` that may use it
#   hack/ceph.sh config CONFIG_DIR   copy its ceph.conf and client.cinder's keyring into a kstack
#                                    config directory where kstack reads them:
#                                    config/cinder/ceph.conf and
#                                    config/cinder/cinder-volume/ceph.client.cinder.keyring
#   hack/ceph.sh status              `ceph -s`
#   hack/ceph.sh down                stop it and delete its state
#
# The OSD keeps objects in memory (`memstore`, Ceph's own object store for tests), so the
# cluster needs no disk, partition, loop device or kernel module: these machines' kernels have
# no device-mapper, NFS or iSCSI, and Cinder's RBD driver and librbd are user space. What a
# volume holds is gone when the OSD stops. One replica per object (size 1). State, keys and
# logs are under /run/kstack-ceph; `down` leaves no process and no file behind.
set -o errexit -o nounset -o pipefail

DIR=/run/kstack-ceph
CONF=$DIR/ceph.conf
POOL=volumes
CLIENT=cinder
# The OSD's memory store: objects are written only as volumes fill, so this is a ceiling.
MEMSTORE_BYTES=$((4 << 30))

log() { printf 'kstack ceph: %s\n' "$*" >&2; }
die() { printf 'kstack ceph: error: %s\n' "$*" >&2; exit 1; }

usage() {
    sed -n '2,/^set -o/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&"${2:-1}"
    exit "${1:-0}"
}

ceph_() { ceph --conf "$CONF" --name client.admin --keyring "$DIR/client.admin.keyring" "$@"; }

install_ceph() {
    command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null && command -v ceph >/dev/null && return
    log "installing ceph-mon, ceph-osd and ceph-common with apt-get"
    apt-get update >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ceph-mon ceph-osd ceph-common >/dev/null
}

# shellcheck source=hack/pidfile.sh
. "$(dirname "$0")/pidfile.sh"
running() { [ -n "$(pid_in "$DIR/$1.pid")" ]; }

up() {
    local address=$1
    [ "$(id -u)" = 0 ] || die "needs root (it starts Ceph daemons); run it with sudo"
    # The address list is read whole, a few times: a dump that interfaces changed under (pods
    # starting or going away) ends with an error, and a pipe into `grep -q` may end early.
    local addrs="" _
    for _ in 1 2 3 4 5; do
        addrs=$(ip -o -4 addr show 2>/dev/null || true)
        case "$addrs" in *" inet $address/"*) break ;; esac
        sleep 1
    done
    case "$addrs" in
        *" inet $address/"*) ;;
        *) die "no interface of this machine has the address $address (for the dev cluster's real node, run \`bash hack/devcluster.sh up\` first: it puts 10.245.0.1 on kstack0); its IPv4 addresses: $(awk '{print $2, $4}' <<<"$addrs" | tr '\n' ' ')" ;;
    esac
    if running mon.a && running osd.0; then
        log "already running on $(awk '$1 == "mon_host" {print $3}' "$CONF")"
        return
    fi
    down_quietly
    install_ceph
    mkdir -p "$DIR"
    chmod 700 "$DIR"
    local fsid t0=$SECONDS
    fsid=$(cat /proc/sys/kernel/random/uuid)
    cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon_host = $address
mon_initial_members = a
public_addr = $address
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
mon_data_avail_crit = 1
mon_data_avail_warn = 2
mon_warn_on_msgr2_not_enabled = false
auth_allow_insecure_global_id_reclaim = false
osd_crush_chooseleaf_type = 0
run_dir = $DIR
admin_socket = $DIR/\$cluster-\$name.asok
log_file = $DIR/\$name.log
mon_data = $DIR/mon-\$id
osd_data = $DIR/osd-\$id
osd_objectstore = memstore
memstore_device_bytes = $MEMSTORE_BYTES
keyring = $DIR/\$name.keyring
EOF
    ceph-authtool --create-keyring "$DIR/mon.a.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
    ceph-authtool --create-keyring "$DIR/client.admin.keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
    ceph-authtool "$DIR/mon.a.keyring" --import-keyring "$DIR/client.admin.keyring" >/dev/null
    monmaptool --create --add a "$address" --fsid "$fsid" "$DIR/monmap" >/dev/null
    ceph-mon --conf "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/mon.a.keyring"
    ceph-mon --conf "$CONF" -i a --pid-file "$DIR/mon.a.pid"
    local uuid id
    uuid=$(cat /proc/sys/kernel/random/uuid)
    id=$(timeout 60 ceph --conf "$CONF" --name client.admin --keyring "$DIR/client.admin.keyring" osd new "$uuid") \
        || die "the monitor did not answer on $address:6789 within 60 s (log: $DIR/mon.a.log)"
    ceph_ auth get-or-create "osd.$id" osd 'allow *' mon 'allow profile osd' mgr 'allow profile osd' \
        -o "$DIR/osd.$id.keyring" 2>/dev/null
    mkdir -p "$DIR/osd-$id"
    ceph-osd --conf "$CONF" -i "$id" --mkfs --osd-uuid "$uuid" 2>>"$DIR/osd-mkfs.log" \
        || die "osd.$id: mkfs failed (log: $DIR/osd-mkfs.log)"
    ceph-osd --conf "$CONF" -i "$id" --pid-file "$DIR/osd.$id.pid" 2>>"$DIR/osd.$id.stderr"
    for _ in $(seq 60); do
        ceph_ osd dump 2>/dev/null | grep -q "^osd.$id up" && break
        sleep 1
    done
    ceph_ osd dump | grep -q "^osd.$id up" || die "osd.$id did not come up within 60 s (log: $DIR/osd.$id.log)"
    ceph_ osd pool create "$POOL" 8 >/dev/null 2>&1
    ceph_ osd pool application enable "$POOL" rbd >/dev/null 2>&1
    ceph_ auth get-or-create "client.$CLIENT" mon 'profile rbd' osd "profile rbd pool=$POOL" \
        -o "$DIR/ceph.client.$CLIENT.keyring" 2>/dev/null
    log "up on $address in $((SECONDS - t0)) s: pool $POOL, client client.$CLIENT (state and logs in $DIR)"
}

config() {
    local dir=$1
    [ -f "$DIR/ceph.client.$CLIENT.keyring" ] || die "no cluster is running; run \`bash hack/ceph.sh up ADDRESS\` first"
    [ -f "$dir/globals.yml" ] || die "$dir is not a kstack config directory (no globals.yml); run \`kstack init $dir\` first"
    mkdir -p "$dir/config/cinder/cinder-volume"
    # What a client needs: the cluster's id and its monitor.
    awk '$1 == "[global]" || $1 == "fsid" || $1 == "mon_host"' "$CONF" >"$dir/config/cinder/ceph.conf"
    install -m 0600 "$DIR/ceph.client.$CLIENT.keyring" "$dir/config/cinder/cinder-volume/ceph.client.$CLIENT.keyring"
    log "wrote $dir/config/cinder/ceph.conf and $dir/config/cinder/cinder-volume/ceph.client.$CLIENT.keyring"
}

down_quietly() {
    local name
    for name in osd.0 mon.a; do stop_pid_in "$DIR/$name.pid" 6; done
    rm -rf "$DIR"
}

case "${1:-}" in
    up) [ $# -eq 2 ] || usage 2 2; up "$2" ;;
    config) [ $# -eq 2 ] || usage 2 2; config "$2" ;;
    status) [ -f "$CONF" ] || die "no cluster is running"; ceph_ -s ;;
    down) down_quietly; log "down" ;;
    -h|--help|help) usage 0 ;;
    *) usage 2 2 ;;
esac
