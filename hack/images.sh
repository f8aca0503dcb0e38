#!/usr/bin/env bash
# Builds every container image of kstack's default cloud to Kolla's image contract, from Debian
# packages and PyPI only (no container registry), and caches the result by a hash of all its
# inputs. See docs/IMAGES.md for what is built, how the contract is kept and why this is not
# kolla-build.
#
#   hack/images.sh [--release RELEASE] [--tag TAG]
#
#   --release  the OpenStack release: 2025.1 (the default) or 2024.2; its Python pins are
#              hack/images/releases/<release>/requirements.txt, its Kolla contract files those of
#              that release's Kolla
#   --tag      the images' tag (default <release>-debian-bookworm)
#
# Output: the last line on stdout is the result directory, ~/.cache/kstack/images/<hash>/, with
#   images.tar  one `docker save` of every image (layers stored once)
#   images.txt  one image reference per line, kstack.local/kolla/<image>:<tag>
# When that directory exists already the script builds nothing and only prints it.
# Progress and errors go to stderr; every step logs to <result dir>.logs/<step>.log.
#
# Tools: debootstrap and Debian's docker.io (dockerd 20.10, legacy builder) are installed with
# apt-get when missing. The script runs a containerd and a dockerd of its own (data under
# ~/.cache/kstack/docker, sockets under /run/kstack-docker) and stops them when it ends.
# Environment: KSTACK_CACHE (default ~/.cache/kstack), KSTACK_DEBIAN_MIRROR
# (default http://deb.debian.org/debian), KSTACK_IMAGES_WHEEL_PORT (default 18739),
# KSTACK_IMAGES_KEEP (result directories kept, default 4).
set -o errexit -o nounset -o pipefail

usage() {
    local text
    text=$(sed -n '2,/^set -o/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//')
    if [ "${1:-0}" = 0 ]; then echo "$text"; else echo "$text" >&2; fi
    exit "${1:-0}"
}

RELEASE=2025.1
TAG=
while [ $# -gt 0 ]; do
    case $1 in
        --release) [ $# -ge 2 ] || usage 2; RELEASE=$2; shift 2 ;;
        --release=*) RELEASE=${1#--release=}; shift ;;
        --tag) [ $# -ge 2 ] || usage 2; TAG=$2; shift 2 ;;
        --tag=*) TAG=${1#--tag=}; shift ;;
        -h|--help) usage 0 ;;
        *) echo "images.sh: unknown argument '$1'" >&2; usage 2 ;;
    esac
done
# Each release's Kolla: its Dockerfiles' start scripts, users and contract files are used as is.
case $RELEASE in
    2025.1) KOLLA_VERSION=20.6.0 ;;  # Epoxy is Kolla's 20.x series
    2024.2) KOLLA_VERSION=19.8.0 ;;  # Dalmatian, 19.x
    *) echo "images.sh: unknown release '$RELEASE' (known: 2025.1, 2024.2)" >&2; exit 2 ;;
esac
TAG=${TAG:-$RELEASE-debian-bookworm}
[[ $TAG =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || { echo "images.sh: invalid tag '$TAG'" >&2; exit 2; }

# The image references kstack renders for the dev cluster: {docker_registry}/{docker_namespace}/
# {image}:{tag} with docker_registry kstack.local and docker_namespace kolla.
REGISTRY=kstack.local
NAMESPACE=kolla
SUITE=bookworm
MIRROR=${KSTACK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
WHEEL_PORT=${KSTACK_IMAGES_WHEEL_PORT:-18739}
KEEP=${KSTACK_IMAGES_KEEP:-4}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HERE=$ROOT/hack/images
# The release's pins of the service venv (kolla-toolbox's are shared by every release).
REQUIREMENTS=$HERE/releases/$RELEASE/requirements.txt
# shellcheck source=hack/pidfile.sh
. "$ROOT/hack/pidfile.sh"
CACHE=${KSTACK_CACHE:-$HOME/.cache/kstack}
RESULTS=$CACHE/images
WHEELHOUSE=$CACHE/wheelhouse
DOCKER_ROOT=$CACHE/docker
RUN_DIR=/run/kstack-docker
DOCKER_SOCK=$RUN_DIR/docker.sock
CONTAINERD_SOCK=$RUN_DIR/containerd/containerd.sock

# Every image of the default cloud: crates/kstack-model/catalog/services.yaml (containers and
# bootstrap tasks) and crates/kstack-render/src/tasks.rs (kolla-toolbox, the mariadb client).
IMAGES=(
    mariadb-server rabbitmq memcached haproxy
    keystone keystone-fernet glance-api placement-api
    nova-api nova-scheduler nova-conductor nova-novncproxy nova-compute nova-libvirt
    neutron-server neutron-openvswitch-agent neutron-dhcp-agent neutron-l3-agent neutron-metadata-agent
    openvswitch-db-server openvswitch-vswitchd
    heat-api heat-api-cfn heat-engine horizon
    cinder-api cinder-scheduler cinder-volume
    kolla-toolbox
    victoria-logs vlagent
)
# Central logging's store and collector (enable_central_logging): VictoriaLogs and its vlagent,
# built from the Go module proxy. Kolla's own central logging (fluentd, OpenSearch) has no
# source on these package registries.
VICTORIALOGS_VERSION=v1.52.1
# Their user: Kolla's table (kolla/common/users.py) has none for them; its uids end at 42494.
VICTORIALOGS_UID=42600

log() { printf '%s images.sh: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'images.sh: error: %s\n' "$*" >&2; exit 1; }

# --- the cache key -------------------------------------------------------------------------------
# Everything that changes what is built: this script, hack/images/ (Dockerfile fragments live in
# this script; package list, pins, own files there; of releases/ only this release's), the Kolla
# release, the Debian suite and mirror, and the references.
input_hash() {
    {
        printf 'release=%s tag=%s registry=%s namespace=%s kolla=%s suite=%s mirror=%s\n' \
            "$RELEASE" "$TAG" "$REGISTRY" "$NAMESPACE" "$KOLLA_VERSION" "$SUITE" "$MIRROR"
        sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1
        (cd "$HERE" && find . -path ./releases -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
        (cd "$HERE" && find "releases/$RELEASE" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    } | sha256sum | cut -c1-16
}
HASH=$(input_hash)
OUT=$RESULTS/$HASH
if [ -f "$OUT/images.tar" ] && [ -f "$OUT/images.txt" ]; then
    log "up to date ($(wc -l < "$OUT/images.txt") images, tag $TAG)"
    echo "$OUT"
    exit 0
fi

[ "$(id -u)" = 0 ] || die "needs root (it runs its own dockerd and debootstrap); run it with sudo"
mkdir -p "$RESULTS" "$WHEELHOUSE/built"
# One build at a time on the machine: the daemon's sockets and the wheel server port are shared
# whatever KSTACK_CACHE says.
mkdir -p "$RUN_DIR"
exec 9>"$RUN_DIR.lock"
flock -n 9 || { log "another images.sh is running; waiting for it"; flock 9; }
if [ -f "$OUT/images.tar" ] && [ -f "$OUT/images.txt" ]; then
    echo "$OUT"
    exit 0
fi

LOGS=$OUT.logs
WORK=$RESULTS/work-$HASH
rm -rf "$LOGS" "$WORK"
mkdir -p "$LOGS" "$WORK"
START=$(date +%s)

# step NAME LOG CMD...: runs CMD with its output in LOG; on failure names the step and the log.
# CMD runs in a subshell of its own, started in the background and waited for: in an `if` or `||`
# bash would ignore errexit inside CMD's functions, and a failed command would go unnoticed.
step() {
    local name=$1 logfile=$2 t0=$SECONDS rc=0
    shift 2
    log "$name ..."
    ( "$@" ) >"$logfile" 2>&1 &
    wait $! || rc=$?
    if [ "$rc" != 0 ]; then
        printf 'images.sh: error: %s failed; log: %s\n--- last lines of the log ---\n' "$name" "$logfile" >&2
        tail -n 25 "$logfile" >&2
        exit 1
    fi
    log "$name done in $((SECONDS - t0)) s"
}

# --- tools ---------------------------------------------------------------------------------------
need_apt=()
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
{ [ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ] && command -v containerd >/dev/null; } || need_apt+=(docker.io)
command -v flock >/dev/null || die "flock (util-linux) is missing"
for tool in python3 pip3 tar sha256sum curl; do
    command -v "$tool" >/dev/null || die "$tool is missing; install it first"
done
if [ ${#need_apt[@]} -gt 0 ]; then
    install_tools() {
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need_apt[@]}"
    }
    step "installing ${need_apt[*]} with apt-get" "$LOGS/apt-tools.log" install_tools
fi
# Debian's client, which speaks to its 20.10 daemon with the legacy builder (no buildx here).
DOCKER_BIN=/usr/bin/docker
export DOCKER_BUILDKIT=0
docker() { "$DOCKER_BIN" -H "unix://$DOCKER_SOCK" "$@"; }

# --- Kolla's contract files ----------------------------------------------------------------------
KOLLA_WHEEL=$RESULTS/kolla/kolla-$KOLLA_VERSION-py3-none-any.whl
if [ ! -f "$KOLLA_WHEEL" ]; then
    step "downloading kolla==$KOLLA_VERSION from PyPI" "$LOGS/kolla-wheel.log" \
        pip3 download --no-deps --only-binary :all: -d "$RESULTS/kolla" "kolla==$KOLLA_VERSION"
fi
CTX=$WORK/ctx
mkdir -p "$CTX/kolla" "$CTX/dockerfiles"
unpack_kolla() {
    python3 - "$KOLLA_WHEEL" "$WORK/kolla-wheel" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
    local docker_dir
    docker_dir=$(find "$WORK/kolla-wheel" -type d -path '*/share/kolla/docker' | head -n 1)
    [ -n "$docker_dir" ] || { echo "no share/kolla/docker in $KOLLA_WHEEL"; return 1; }
    # Only the directories of the images built here enter the build context.
    for d in base mariadb rabbitmq memcached keystone glance placement nova neutron openvswitch heat horizon cinder kolla-toolbox; do
        cp -a "$docker_dir/$d" "$CTX/kolla/"
    done
    find "$CTX/kolla" \( -name 'Dockerfile.j2' -o -name '__pycache__' \) -prune -exec rm -rf {} +
    # Kolla's fixed uids and gids (kolla/common/users.py), as a script run at build time.
    python3 - "$(find "$WORK/kolla-wheel" -path '*/kolla/common/users.py' | head -n 1)" > "$CTX/users.sh" <<'PY'
import runpy, sys
users = runpy.run_path(sys.argv[1])["USERS"]
print("set -e")
for key, u in sorted(users.items()):
    name = key[: -len("-user")]
    group = u.get("group", name)
    print(f"groupadd --gid {u['gid']} {group}")
    print(f"useradd -l -M --shell /usr/sbin/nologin --uid {u['uid']} --gid {u['gid']} {name}")
PY
}
step "unpacking the kolla $KOLLA_VERSION wheel" "$LOGS/kolla-unpack.log" unpack_kolla
# Static binaries (no cgo), built with the module and build caches under the cache directory.
build_victorialogs() {
    mkdir -p "$CTX/bin"
    GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache GOFLAGS=-mod=mod GOTOOLCHAIN=local \
        CGO_ENABLED=0 GOBIN=$CTX/bin \
        go install -trimpath -ldflags='-s -w' \
        "github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs@$VICTORIALOGS_VERSION" \
        "github.com/VictoriaMetrics/VictoriaLogs/app/vlagent@$VICTORIALOGS_VERSION"
}
step "building victoria-logs and vlagent $VICTORIALOGS_VERSION from the Go module proxy" \
    "$LOGS/victorialogs.log" build_victorialogs
cp -a "$HERE/files" "$CTX/files"
cp "$HERE/packages.txt" "$REQUIREMENTS" "$HERE/toolbox-requirements.txt" "$CTX/"
sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$HERE/packages.txt" | sort -u > "$CTX/packages.list"
cat > "$CTX/files/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian}/debian-security $SUITE-security main
EOF

# --- our own containerd and dockerd --------------------------------------------------------------
WHEEL_PID= FETCH_PID= WHEELBUILD_PID=
cleanup() {
    local rc=$?
    set +o errexit
    [ -n "$WHEEL_PID" ] && kill "$WHEEL_PID" 2>/dev/null
    [ -n "$FETCH_PID" ] && kill "$FETCH_PID" 2>/dev/null
    [ -n "$WHEELBUILD_PID" ] && kill "$WHEELBUILD_PID" 2>/dev/null
    # The daemons were started by this run (under its lock); their pidfiles say which they are.
    local name
    for name in dockerd containerd; do stop_pid_in "$RUN_DIR/$name.pid" 30; done
    # dockerd leaves its network namespace file and the private mount of its data root behind.
    mountpoint -q "$RUN_DIR/exec/netns/default" 2>/dev/null && umount "$RUN_DIR/exec/netns/default"
    mountpoint -q "$DOCKER_ROOT" 2>/dev/null && umount "$DOCKER_ROOT"
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Stops a daemon a crashed earlier run left behind (its pidfile is under our run dir).
stop_stale() {
    local pidfile=$1 pid
    pid=$(pid_in "$pidfile")
    [ -n "$pid" ] && echo "stopping $(cat "/proc/$pid/comm" 2>/dev/null) $pid left by an earlier run"
    stop_pid_in "$pidfile" 30
}
start_daemons() {
    stop_stale "$RUN_DIR/dockerd.pid"
    stop_stale "$RUN_DIR/containerd.pid"
    mkdir -p "$RUN_DIR/containerd" "$DOCKER_ROOT/containerd"
    # A containerd of our own: dockerd would otherwise join a system containerd found at
    # /run/containerd (the dev cluster's node runs one).
    cat > "$RUN_DIR/containerd.toml" <<EOF
version = 2
root = "$DOCKER_ROOT/containerd"
state = "$RUN_DIR/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$CONTAINERD_SOCK"
EOF
    containerd --config "$RUN_DIR/containerd.toml" >"$LOGS/containerd.log" 2>&1 9>&- &
    CONTAINERD_PID=$!
    echo "$CONTAINERD_PID" > "$RUN_DIR/containerd.pid"
    for _ in $(seq 1 40); do [ -S "$CONTAINERD_SOCK" ] && break; sleep 0.25; done
    [ -S "$CONTAINERD_SOCK" ] || { echo "containerd did not start; see $LOGS/containerd.log"; return 1; }
    /usr/sbin/dockerd --data-root "$DOCKER_ROOT" --exec-root "$RUN_DIR/exec" \
        --pidfile "$RUN_DIR/dockerd.pid" -H "unix://$DOCKER_SOCK" --containerd "$CONTAINERD_SOCK" \
        --storage-driver overlay2 --exec-opt native.cgroupdriver=cgroupfs \
        --iptables=false --ip-forward=false --bridge=none >"$LOGS/dockerd.log" 2>&1 9>&- &
    DOCKERD_PID=$!
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && return 0; kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.5; done
    echo "dockerd did not start; see $LOGS/dockerd.log"
    return 1
}
step "starting containerd and dockerd (data root $DOCKER_ROOT)" "$LOGS/daemons.log" start_daemons

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# --- the wheelhouse: every pinned wheel, downloaded on the host ----------------------------------
# Prints the pins of requirements files that have no file in the wheelhouse (wheel or sdist).
missing_pins() {
    python3 - "$WHEELHOUSE" "$@" <<'PY'
import os, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
have = set()
for d in (sys.argv[1], os.path.join(sys.argv[1], "built")):
    for f in os.listdir(d):
        if f.endswith(".whl"):
            name, version = f.split("-")[:2]
        elif f.endswith((".tar.gz", ".zip")):
            name, version = f[: -7 if f.endswith(".tar.gz") else -4].rsplit("-", 1)
        else:
            continue
        have.add((norm(name), version))
for path in sys.argv[2:]:
    for line in open(path):
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split(";")[0].split("==")
            if (norm(name), version.strip()) not in have:
                print(line)
PY
}
FETCH_PID=
missing_pins "$REQUIREMENTS" "$HERE/toolbox-requirements.txt" > "$WORK/missing.txt"
if [ -s "$WORK/missing.txt" ]; then
    fetch_wheels() {
        # Some sdists (XStatic-*) import pkg_resources while pip prepares their metadata: build
        # them with the setuptools the lock pins.
        grep -i '^setuptools==' "$REQUIREMENTS" > "$WORK/build-constraints.txt"
        # Debian bookworm's interpreter: CPython 3.11, glibc 2.36.
        PIP_CONSTRAINT=$WORK/build-constraints.txt pip3 download --no-deps --prefer-binary \
            --python-version 3.11 --implementation cp --abi cp311 \
            --platform manylinux_2_36_x86_64 --platform manylinux_2_28_x86_64 \
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
            --platform manylinux2010_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64 \
            -r "$WORK/missing.txt" -d "$WHEELHOUSE"
    }
    # In the background, while debootstrap runs: one waits on the network, the other on dpkg.
    ( step "downloading $(wc -l < "$WORK/missing.txt") pinned packages from PyPI into $WHEELHOUSE" \
        "$LOGS/wheelhouse.log" fetch_wheels ) &
    FETCH_PID=$!
fi

# --- the Debian base: debootstrap --variant=minbase, imported once -------------------------------
BASE_KEY=$(printf '%s %s minbase' "$SUITE" "$MIRROR" | sha256sum | cut -c1-12)
BASE_TAR=$RESULTS/base/debian-$SUITE-minbase-$BASE_KEY.tar
BASE_IMAGE=kstack-build/debootstrap:$BASE_KEY
if [ ! -f "$BASE_TAR" ]; then
    make_rootfs() {
        local dir=$WORK/rootfs
        rm -rf "$dir" && mkdir -p "$dir" "$RESULTS/base"
        debootstrap --variant=minbase "$SUITE" "$dir" "$MIRROR"
        [ -x "$dir/bin/sh" ] && [ -x "$dir/usr/bin/apt-get" ] || { echo "debootstrap left no usable rootfs in $dir"; return 1; }
        # No apt lists or package cache in the image; the builds fetch fresh lists.
        rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/archives/*.deb
        tar --numeric-owner -C "$dir" -cf "$BASE_TAR.tmp" .
        mv "$BASE_TAR.tmp" "$BASE_TAR"
        rm -rf "$dir"
    }
    step "debootstrap $SUITE (minbase) from $MIRROR" "$LOGS/debootstrap.log" make_rootfs
fi
if ! have_image "$BASE_IMAGE"; then
    step "importing the base rootfs as $BASE_IMAGE" "$LOGS/import.log" \
        docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        "$BASE_TAR" "$BASE_IMAGE"
fi

if [ -n "$FETCH_PID" ]; then
    wait "$FETCH_PID" || die "the wheelhouse is incomplete (the download failed, see above)"
    FETCH_PID=
fi

# Pins PyPI has only as sdists are built into cp311 wheels in a throwaway builder container.
BUILDER_IMAGE=kstack-build/builder:$BASE_KEY
wheel_missing() {
    python3 - "$WHEELHOUSE" "$@" <<'PY'
import os, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
wheels = set()
for d in (sys.argv[1], os.path.join(sys.argv[1], "built")):
    wheels |= {tuple(f.split("-")[:2]) for f in os.listdir(d) if f.endswith(".whl")}
wheels = {(norm(n), v) for n, v in wheels}
sdists = {}
for f in os.listdir(sys.argv[1]):
    if f.endswith((".tar.gz", ".zip")):
        name, version = f[: -7 if f.endswith(".tar.gz") else -4].rsplit("-", 1)
        sdists[(norm(name), version)] = f
for path in sys.argv[2:]:
    for line in open(path):
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split(";")[0].split("==")
            key = (norm(name), version.strip())
            if key not in wheels:
                if key not in sdists:
                    sys.exit(f"no wheel and no sdist for {line} in {sys.argv[1]}")
                print(sdists[key])
PY
}
wheel_missing "$REQUIREMENTS" "$HERE/toolbox-requirements.txt" | sort -u > "$WORK/sdists.txt" \
    || die "the wheelhouse is incomplete (see above); delete $WHEELHOUSE and run again"
# In the background, while kolla-base builds: only the venvs need these wheels.
build_wheels() {
    [ -s "$WORK/sdists.txt" ] || return 0
    if ! have_image "$BUILDER_IMAGE"; then
        mkdir -p "$WORK/builder"
        cat > "$WORK/builder/Dockerfile" <<EOF
FROM $BASE_IMAGE
COPY sources.list /etc/apt/sources.list
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends build-essential python3-dev python3-venv \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
EOF
        cp "$CTX/files/sources.list" "$WORK/builder/"
        step "building the wheel builder image" "$LOGS/builder-image.log" \
            docker build --network host -t "$BUILDER_IMAGE" "$WORK/builder"
    fi
    build_sdists() {
        local setuptools
        setuptools=$(grep -i '^setuptools==' "$REQUIREMENTS")
        # shellcheck disable=SC2046
        docker run --rm --network none -v "$WHEELHOUSE:/wh" "$BUILDER_IMAGE" sh -ec "
            python3 -m venv /b
            /b/bin/pip install -q --no-index -f /wh '$setuptools'
            cd /wh
            /b/bin/pip wheel --no-deps --no-build-isolation --no-index -f /wh -w /wh/built $(tr '\n' ' ' < "$WORK/sdists.txt")"
    }
    step "building wheels from $(wc -l < "$WORK/sdists.txt") sdists ($(tr '\n' ' ' < "$WORK/sdists.txt"))" \
        "$LOGS/sdists.log" build_sdists
}
( build_wheels ) &
WHEELBUILD_PID=$!

# The builds install from the wheelhouse over loopback (they run with --network host): nothing is
# copied into a layer and pip needs no index or TLS.
# (SO_REUSEADDR as http.server sets it: connections of an earlier run in TIME_WAIT do not count.)
if ! python3 -c "import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $WHEEL_PORT))" 2>/dev/null; then
    die "port 127.0.0.1:$WHEEL_PORT for the wheel server is taken; set KSTACK_IMAGES_WHEEL_PORT"
fi
WHEELS=http://127.0.0.1:$WHEEL_PORT
start_wheel_server() {
    python3 -m http.server --bind 127.0.0.1 --directory "$WHEELHOUSE" "$WHEEL_PORT" >"$LOGS/wheel-server.log" 2>&1 9>&- &
    WHEEL_PID=$!
    for _ in $(seq 1 40); do curl -fso /dev/null "$WHEELS/" && break; sleep 0.25; done
    curl -fso /dev/null "$WHEELS/" || die "the wheel server did not start; see $LOGS/wheel-server.log"
}

# --- Dockerfiles ---------------------------------------------------------------------------------
# Our own Dockerfiles, producing what Kolla's 2025.1 Dockerfiles produce for these images: the same
# files at the same paths and modes, the same users, USER, ENTRYPOINT and CMD. The layers are
# shared: kolla-base (packages + contract) -> openstack (the venv) -> project bases -> images.
KB=kstack-build
ref() { echo "$REGISTRY/$NAMESPACE/$1:$TAG"; }
inter() { echo "$KB/$1:$HASH"; }
K=kolla   # Kolla's docker/ tree inside the build context

# Kolla's configure_user: the user joins group kolla (and more groups), gets its home.
configure_user() {
    local name=$1 groups=${2:-} home=${3:-/var/lib/$1}
    printf 'RUN usermod --append --home %s --groups kolla %s' "$home" "$name"
    [ -n "$groups" ] && printf ' \\\n && usermod --append --groups %s %s' "$groups" "$name"
    printf ' \\\n && mkdir -p %s \\\n && chown -R %s: %s\n' "$home" "$name" "$home"
}
# A project's own files that its wheel installs under the venv's etc/ go to /etc/<project>, with
# the rootwrap exec_dirs and the CADF audit map Kolla's images have.
project_etc() {
    local p=$1
    cat <<EOF
RUN mkdir -p /etc/$p \\
 && cp -r /var/lib/kolla/venv/etc/$p/. /etc/$p/ \\
 && if [ -f /var/lib/kolla/venv/etc/pycadf/${p}_api_audit_map.conf ]; then cp /var/lib/kolla/venv/etc/pycadf/${p}_api_audit_map.conf /etc/$p/; fi \\
 && if [ -f /etc/$p/rootwrap.conf ]; then sed -i 's|^exec_dirs.*|exec_dirs=/var/lib/kolla/venv/bin,/sbin,/usr/sbin,/bin,/usr/bin,/usr/local/bin,/usr/local/sbin|' /etc/$p/rootwrap.conf; fi
EOF
}
# A sudoers.d drop-in, mode 0440, in a 0750 /etc/sudoers.d.
sudoers() {
    printf 'COPY %s /etc/sudoers.d/%s\nRUN chmod 750 /etc/sudoers.d && chmod 440 /etc/sudoers.d/%s\n' "$1" "$2" "$2"
}
# COPY SRC DEST with MODE.
install_file() { printf 'COPY %s %s\nRUN chmod %s %s\n' "$1" "$2" "$3" "$2"; }
# kolla_opt FILE CMD...: CMD's output when the release's Kolla has $K/FILE, else nothing (files
# a later Kolla added: 2024.2's has no kolla_patch, no kolla_nova_libvirt_start, no neutron
# wrappers and no l3 agent extend_start).
kolla_opt() { local f=$1; shift; if [ -e "$CTX/$K/$f" ]; then "$@"; fi; }
PATCH_BIN=$(kolla_opt base/kolla_patch.sh echo "/usr/local/bin/kolla_patch ")
WRAPPERS=()
for w in dnsmasq haproxy keepalived neutron-keepalived-state-change radvd copy-wrappers delete-wrappers; do
    if [ -e "$CTX/$K/neutron/neutron-base/$w" ]; then WRAPPERS+=("$K/neutron/neutron-base/$w"); fi
done

# parent and body of every image built here; the key is the image (or intermediate) name.
declare -A PARENT BODY
add() { PARENT[$1]=$2; BODY[$1]=$3; }

# kolla-base: Debian packages (one layer) and Kolla's base contract.
add kolla-base "$BASE_IMAGE" "$(cat <<EOF
ENV LANG=en_US.UTF-8 KOLLA_BASE_DISTRO=debian KOLLA_BASE_ARCH=x86_64
COPY files/sources.list /etc/apt/sources.list
COPY files/dpkg-nodoc /etc/dpkg/dpkg.cfg.d/kstack-nodoc
COPY users.sh packages.list /tmp/kstack/
# Kolla's users and groups exist before the packages, so Debian's maintainer scripts reuse them
# (the system uid range is widened for that, as Kolla does); services are never started here.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \\
 && apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get dist-upgrade -y \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends adduser \\
 && sed -i -e 's/^#*LAST_SYSTEM_UID=.*/LAST_SYSTEM_UID=59999/' -e 's/^#*LAST_SYSTEM_GID=.*/LAST_SYSTEM_GID=59999/' /etc/adduser.conf \\
 && sh /tmp/kstack/users.sh \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \$(cat /tmp/kstack/packages.list) \\
 && (cd /tmp/kstack && apt-get download novnc && dpkg-deb -x novnc_*.deb novnc && cp -a novnc/usr/share/novnc /usr/share/novnc) \\
 && echo 'en_US.UTF-8 UTF-8' > /etc/locale.gen && locale-gen \\
 && echo 'LANG=en_US.UTF-8' > /etc/default/locale \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/kstack /usr/sbin/policy-rc.d \\
 && rm -rf /etc/localtime /var/lib/mysql/*
COPY $K/base/set_configs.py /usr/local/bin/kolla_set_configs
COPY $K/base/start.sh /usr/local/bin/kolla_start
COPY $K/base/copy_cacerts.sh /usr/local/bin/kolla_copy_cacerts
COPY $K/base/install_projects.sh /usr/local/bin/kolla_install_projects
COPY $K/base/httpd_setup.sh /usr/local/bin/kolla_httpd_setup
$(kolla_opt base/kolla_patch.sh echo "COPY $K/base/kolla_patch.sh /usr/local/bin/kolla_patch")
COPY $K/base/healthcheck_curl $K/base/healthcheck_filemod $K/base/healthcheck_listen $K/base/healthcheck_port $K/base/healthcheck_socket /usr/local/bin/
COPY $K/base/sudoers /etc/sudoers
RUN touch /usr/local/bin/kolla_extend_start \\
 && chmod 755 /usr/local/bin/kolla_start /usr/local/bin/kolla_set_configs /usr/local/bin/kolla_copy_cacerts \\
              /usr/local/bin/kolla_install_projects ${PATCH_BIN}/usr/local/bin/healthcheck_* \\
 && chmod 644 /usr/local/bin/kolla_extend_start /usr/local/bin/kolla_httpd_setup \\
 && chmod 440 /etc/sudoers \\
 && mkdir -p /var/log/kolla && chown :kolla /var/log/kolla && chmod 2775 /var/log/kolla
ENTRYPOINT ["dumb-init", "--single-child", "--"]
CMD ["kolla_start"]
EOF
)"

# openstack: one venv with every OpenStack project of the cloud, first on PATH.
add openstack "$(inter kolla-base)" "$(cat <<EOF
COPY requirements.txt /var/lib/kolla/requirements.txt
COPY files/venv-check /tmp/venv-check
RUN python3 -m venv --system-site-packages /var/lib/kolla/venv \\
 && ln -s python3.11 /var/lib/kolla/venv/lib/python3 \\
 && /var/lib/kolla/venv/bin/pip install --no-cache-dir --no-index --only-binary :all: --no-deps \\
      -f $WHEELS/ -f $WHEELS/built/ -r /var/lib/kolla/requirements.txt \\
 && sh /tmp/venv-check /var/lib/kolla/venv && rm /tmp/venv-check
ENV PATH=/var/lib/kolla/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Apache listens only where a service's own site says (Kolla empties ports.conf too).
RUN echo > /etc/apache2/ports.conf
EOF
)"

add mariadb-server "$(inter kolla-base)" "$(cat <<EOF
$(configure_user mysql)
COPY files/clustercheck /usr/bin/clustercheck
$(sudoers $K/mariadb/mariadb-server/mariadb_sudoers kolla_mariadb_sudoers)
COPY $K/mariadb/mariadb-server/extend_start.sh /usr/local/bin/kolla_extend_start
COPY $K/mariadb/mariadb-server/security_reset.expect /usr/local/bin/kolla_security_reset
COPY $K/mariadb/mariadb-server/backup.sh /usr/local/bin/kolla_mariadb_backup.sh
COPY $K/mariadb/mariadb-server/backup_replica.sh /usr/local/bin/kolla_mariadb_backup_replica.sh
COPY $K/mariadb/mariadb-server/healthcheck_mariadb /usr/local/bin/healthcheck_mariadb
RUN chmod 644 /usr/local/bin/kolla_extend_start \\
 && chmod 755 /usr/bin/clustercheck /usr/local/bin/kolla_security_reset /usr/local/bin/kolla_mariadb_backup.sh \\
              /usr/local/bin/kolla_mariadb_backup_replica.sh /usr/local/bin/healthcheck_mariadb \\
 && rm -rf /var/lib/mysql/* \\
 && mkdir -p /var/run/mysqld && chown mysql /var/run/mysqld && chmod 755 /var/run/mysqld
# SIGTERM goes to mysqld's whole process group.
ENTRYPOINT ["dumb-init", "--"]
CMD ["kolla_start"]
USER mysql
EOF
)"

add rabbitmq "$(inter kolla-base)" "$(cat <<EOF
$(configure_user rabbitmq)
RUN rm -rf /var/lib/rabbitmq/* \\
 && mkdir -p /usr/lib/rabbitmq/plugins \\
 && rabbitmq-plugins enable --offline rabbitmq_management rabbitmq_prometheus \\
 && chown -R rabbitmq: /var/lib/rabbitmq
$(install_file $K/rabbitmq/rabbitmq/healthcheck_rabbitmq /usr/local/bin/healthcheck_rabbitmq 755)
$(install_file $K/rabbitmq/rabbitmq/extend_start.sh /usr/local/bin/kolla_extend_start 644)
USER rabbitmq
EOF
)"

# The public endpoints' gateway (enable_haproxy with a public address): Debian's haproxy from
# kolla-base's packages; it starts as root and runs as haproxy (42454).
add haproxy "$(inter kolla-base)" "$(cat <<EOF
$(configure_user haproxy)
EOF
)"

add memcached "$(inter kolla-base)" "$(cat <<EOF
$(configure_user memcached "" /run/memcache)
USER memcached
EOF
)"

add keystone-base "$(inter openstack)" "$(cat <<EOF
$(configure_user keystone)
RUN mkdir -p /etc/keystone /var/www/cgi-bin/keystone \\
 && cp -r /var/lib/kolla/venv/etc/keystone/. /etc/keystone/ \\
 && cp /var/lib/kolla/venv/bin/keystone-wsgi-admin /var/www/cgi-bin/keystone/admin \\
 && cp /var/lib/kolla/venv/bin/keystone-wsgi-public /var/www/cgi-bin/keystone/main \\
 && chmod 755 /var/www/cgi-bin/keystone/*
EOF
)"
add keystone "$(inter keystone-base)" "$(cat <<EOF
$(install_file $K/keystone/keystone/keystone_bootstrap.sh /usr/local/bin/kolla_keystone_bootstrap 755)
$(install_file $K/keystone/keystone/extend_start.sh /usr/local/bin/kolla_extend_start 644)
EOF
)"
add keystone-fernet "$(inter keystone-base)" "$(cat <<EOF
$(install_file $K/keystone/keystone-fernet/fetch_fernet_tokens.py /usr/bin/fetch_fernet_tokens.py 755)
$(install_file $K/keystone/keystone-fernet/keystone_bootstrap.sh /usr/local/bin/kolla_keystone_bootstrap 755)
$(install_file $K/keystone/keystone-fernet/extend_start.sh /usr/local/bin/kolla_extend_start 644)
EOF
)"

add glance-api "$(inter openstack)" "$(cat <<EOF
$(configure_user glance)
COPY $K/glance/glance-base/etc/glance/ /etc/glance/
$(project_etc glance)
$(sudoers $K/glance/glance-base/glance_sudoers kolla_glance_sudoers)
$(install_file $K/glance/glance-base/extend_start.sh /usr/local/bin/kolla_extend_start 644)
$(install_file $K/glance/glance-api/extend_start.sh /usr/local/bin/kolla_glance_extend_start 644)
USER glance
EOF
)"

add placement-api "$(inter openstack)" "$(cat <<EOF
$(configure_user placement)
RUN mkdir -p /etc/placement
$(install_file $K/placement/placement-base/extend_start.sh /usr/local/bin/kolla_extend_start 644)
$(install_file $K/placement/placement-api/extend_start.sh /usr/local/bin/kolla_placement_extend_start 644)
EOF
)"

add nova-base "$(inter openstack)" "$(cat <<EOF
$(configure_user nova qemu)
$(project_etc nova)
$(sudoers $K/nova/nova-base/nova_sudoers kolla_nova_sudoers)
$(install_file $K/nova/nova-base/extend_start.sh /usr/local/bin/kolla_extend_start 644)
RUN touch /usr/local/bin/kolla_nova_extend_start && chmod 644 /usr/local/bin/kolla_nova_extend_start
EOF
)"
add nova-api "$(inter nova-base)" "$(install_file $K/nova/nova-api/extend_start.sh /usr/local/bin/kolla_nova_extend_start 644)"
add nova-scheduler "$(inter nova-base)" "USER nova"
add nova-conductor "$(inter nova-base)" "$(cat <<EOF
$(install_file $K/nova/nova-conductor/extend_start.sh /usr/local/bin/kolla_nova_extend_start 644)
USER nova
EOF
)"
add nova-novncproxy "$(inter nova-base)" "USER nova"
add nova-compute "$(inter nova-base)" "$(cat <<EOF
$(install_file $K/nova/nova-compute/extend_start.sh /usr/local/bin/kolla_nova_extend_start 644)
RUN rm -f /etc/machine-id
USER nova
EOF
)"
# nova-libvirt also gets QEMU's block drivers, RBD among them, for volumes in Ceph
# (cinder_backend_ceph): a layer of its own, like cinder-volume's Ceph client.
add nova-libvirt "$(inter kolla-base)" "$(cat <<EOF
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends qemu-block-extra \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
$(configure_user nova qemu)
RUN rm -f /etc/libvirt/qemu/networks/default.xml /etc/libvirt/qemu/networks/autostart/default.xml
$(install_file $K/nova/nova-libvirt/extend_start.sh /usr/local/bin/kolla_extend_start 644)
$(kolla_opt nova/nova-libvirt/kolla_nova_libvirt_start.sh install_file $K/nova/nova-libvirt/kolla_nova_libvirt_start.sh /usr/local/bin/kolla_nova_libvirt_start 744)
EOF
)"

add neutron-base "$(inter openstack)" "$(cat <<EOF
$(configure_user neutron)
$(project_etc neutron)
RUN mkdir -p /etc/neutron/plugins/ml2 /usr/local/lib/neutron-wrappers /usr/local/etc/neutron-wrappers
$(kolla_opt neutron/neutron-base/copy-wrappers echo "COPY ${WRAPPERS[*]} /usr/local/lib/neutron-wrappers/
RUN chmod +x /usr/local/lib/neutron-wrappers/copy-wrappers /usr/local/lib/neutron-wrappers/delete-wrappers")
$(sudoers $K/neutron/neutron-base/neutron_sudoers kolla_neutron_sudoers)
$(install_file $K/neutron/neutron-base/extend_start.sh /usr/local/bin/kolla_extend_start 644)
RUN touch /usr/local/bin/kolla_neutron_extend_start && chmod 644 /usr/local/bin/kolla_neutron_extend_start
EOF
)"
add neutron-server "$(inter neutron-base)" "$(cat <<EOF
$(install_file $K/neutron/neutron-server/extend_start.sh /usr/local/bin/kolla_neutron_extend_start 644)
USER neutron
EOF
)"
add neutron-openvswitch-agent "$(inter neutron-base)" "USER neutron"
add neutron-dhcp-agent "$(inter neutron-base)" "$(cat <<EOF
$(install_file $K/neutron/neutron-dhcp-agent/extend_start.sh /usr/local/bin/kolla_extend_start 644)
USER neutron
EOF
)"
add neutron-l3-agent "$(inter neutron-base)" "$(cat <<EOF
$(kolla_opt neutron/neutron-l3-agent/extend_start.sh install_file $K/neutron/neutron-l3-agent/extend_start.sh /usr/local/bin/kolla_extend_start 644)
USER neutron
EOF
)"
add neutron-metadata-agent "$(inter neutron-base)" "USER neutron"

add openvswitch-base "$(inter kolla-base)" "$(cat <<EOF
$(install_file $K/openvswitch/openvswitch-base/extend_start.sh /usr/local/bin/kolla_extend_start 644)
$(install_file $K/openvswitch/openvswitch-base/ovs_wrapper.sh /usr/local/bin/ovs_wrapper 755)
RUN if [ -e /usr/sbin/tcpdump ]; then mv /usr/sbin/tcpdump /usr/bin/tcpdump; fi \\
 && touch /usr/local/bin/kolla_openvswitch_extend_start && chmod 644 /usr/local/bin/kolla_openvswitch_extend_start
EOF
)"
add openvswitch-db-server "$(inter openvswitch-base)" \
    "$(install_file $K/openvswitch/openvswitch-db-server/extend_start.sh /usr/local/bin/kolla_openvswitch_extend_start 755)"
add openvswitch-vswitchd "$(inter openvswitch-base)" \
    "$(install_file $K/openvswitch/openvswitch-vswitchd/extend_start.sh /usr/local/bin/kolla_openvswitch_extend_start 644)"

add heat-base "$(inter openstack)" "$(cat <<EOF
$(configure_user heat)
$(project_etc heat)
$(install_file $K/heat/heat-base/extend_start.sh /usr/local/bin/kolla_extend_start 644)
RUN touch /usr/local/bin/kolla_heat_extend_start && chmod 644 /usr/local/bin/kolla_heat_extend_start
EOF
)"
add heat-api "$(inter heat-base)" "$(install_file $K/heat/heat-api/extend_start.sh /usr/local/bin/kolla_heat_extend_start 644)"
add heat-api-cfn "$(inter heat-base)" "$(install_file $K/heat/heat-api-cfn/extend_start.sh /usr/local/bin/kolla_heat_extend_start 644)"
add heat-engine "$(inter heat-base)" "USER heat"

add horizon "$(inter openstack)" "$(cat <<EOF
$(configure_user horizon)
RUN ln -s ../mods-available/headers.load /etc/apache2/mods-enabled/headers.load
COPY files/manage.py /var/lib/kolla/venv/bin/manage.py
RUN site=/var/lib/kolla/venv/lib/python3/site-packages \\
 && mkdir -p /etc/openstack-dashboard/local_settings.d \\
 && cp -r \$site/openstack_dashboard/conf/. /etc/openstack-dashboard/ \\
 && cp \$site/openstack_dashboard/local/local_settings.py.example /etc/openstack-dashboard/local_settings.py \\
 && rm -f \$site/openstack_dashboard/local/local_settings.py \\
 && ln -s /etc/openstack-dashboard/local_settings.py \$site/openstack_dashboard/local/local_settings.py \\
 && rm -rf \$site/openstack_dashboard/local/local_settings.d \\
 && ln -s /etc/openstack-dashboard/local_settings.d \$site/openstack_dashboard/local/local_settings.d \\
 && chmod 755 /var/lib/kolla/venv/bin/manage.py \\
 && for locale in \$site/*/locale; do (cd \${locale%/*} && django-admin compilemessages >/dev/null); done
$(install_file $K/horizon/extend_start.sh /usr/local/bin/kolla_extend_start 644)
EOF
)"

add cinder-base "$(inter openstack)" "$(cat <<EOF
$(configure_user cinder)
$(project_etc cinder)
$(sudoers $K/cinder/cinder-base/cinder_sudoers kolla_cinder_sudoers)
$(install_file $K/cinder/cinder-base/extend_start.sh /usr/local/bin/kolla_extend_start 644)
RUN touch /usr/local/bin/kolla_cinder_extend_start && chmod 644 /usr/local/bin/kolla_cinder_extend_start
EOF
)"
add cinder-api "$(inter cinder-base)" "$(cat <<EOF
$(install_file $K/cinder/cinder-api/extend_start.sh /usr/local/bin/kolla_cinder_extend_start 644)
RUN mkdir -p /var/www/cgi-bin/cinder \\
 && cp -a /var/lib/kolla/venv/bin/cinder-wsgi /var/www/cgi-bin/cinder/cinder-wsgi \\
 && chmod 755 /var/www/cgi-bin/cinder/cinder-wsgi
EOF
)"
add cinder-scheduler "$(inter cinder-base)" "USER cinder"
# cinder-volume also gets Ceph's client and its Python bindings, the RBD driver's only needs
# (cinder_backend_ceph): a layer of its own, so no other image changes for it. The venv sees
# the bindings through --system-site-packages, as in Kolla's images.
add cinder-volume "$(inter cinder-base)" "$(cat <<EOF
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ceph-common python3-rados python3-rbd \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* \\
 && sed -i '1 i include /var/lib/cinder/volumes/*' /etc/tgt/targets.conf
$(sudoers $K/cinder/cinder-volume/cinder_sudoers kolla_cinder_volume_sudoers)
$(install_file $K/cinder/cinder-volume/extend_start.sh /usr/local/bin/kolla_cinder_extend_start 644)
USER cinder
EOF
)"

# kolla-toolbox: its own venv /opt/ansible (ansible-core and the OpenStack client), first on PATH.
add kolla-toolbox "$(inter kolla-base)" "$(cat <<EOF
$(configure_user ansible)
$(configure_user rabbitmq)
COPY toolbox-requirements.txt /opt/ansible-requirements.txt
COPY files/venv-check /tmp/venv-check
RUN python3 -m venv --system-site-packages /opt/ansible \\
 && ln -s python3.11 /opt/ansible/lib/python3 \\
 && /opt/ansible/bin/pip install --no-cache-dir --no-index --only-binary :all: --no-deps \\
      -f $WHEELS/ -f $WHEELS/built/ -r /opt/ansible-requirements.txt \\
 && sh /tmp/venv-check /opt/ansible && rm /tmp/venv-check \\
 && mkdir -p /etc/ansible /usr/share/ansible \\
 && echo 'localhost ansible_connection=local ansible_python_interpreter=/opt/ansible/bin/python' > /etc/ansible/hosts \\
 && sed -i 's|  "identity_api_version": "2.0",|  "identity_api_version": "3",|' /opt/ansible/lib/python3/site-packages/os_client_config/defaults.json
ENV PATH=/opt/ansible/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENV ANSIBLE_LIBRARY=/usr/share/ansible:
$(install_file $K/kolla-toolbox/ansible.cfg /etc/ansible/ansible.cfg 644)
$(sudoers $K/kolla-toolbox/ansible_sudoers kolla_ansible_sudoers)
$(install_file $K/kolla-toolbox/extend_start.sh /usr/local/bin/kolla_extend_start 644)
$(install_file $K/kolla-toolbox/kolla_toolbox.sh /usr/local/bin/kolla_toolbox 755)
USER ansible
EOF
)"

# Central logging, on kolla-base so they keep the contract (kolla_start, config.json,
# kolla_set_configs): static Go binaries of the store and the collector.
add victoria-logs "$(inter kolla-base)" "$(cat <<EOF
RUN groupadd --gid $VICTORIALOGS_UID victorialogs \\
 && useradd -l -M --shell /usr/sbin/nologin --uid $VICTORIALOGS_UID --gid $VICTORIALOGS_UID victorialogs
$(configure_user victorialogs "" /var/lib/victoria-logs)
$(install_file bin/victoria-logs /usr/local/bin/victoria-logs 755)
USER victorialogs
EOF
)"
add vlagent "$(inter kolla-base)" "$(cat <<EOF
$(install_file bin/vlagent /usr/local/bin/vlagent 755)
RUN mkdir -p /var/lib/vlagent
EOF
)"

# --- build ---------------------------------------------------------------------------------------
is_image() { local i; for i in "${IMAGES[@]}"; do [ "$i" = "$1" ] && return 0; done; return 1; }
declare -A BUILT
build() {
    local name=$1 parent=${PARENT[$1]} target df
    [ -n "${BUILT[$name]:-}" ] && return 0
    case $parent in "$KB"/*:"$HASH") build "$(echo "${parent#"$KB"/}" | cut -d: -f1)" ;; esac
    if is_image "$name"; then target=$(ref "$name"); else target=$(inter "$name"); fi
    df=$CTX/dockerfiles/$name.Dockerfile
    {
        echo "FROM $parent"
        echo "${BODY[$name]}"
        # Last, so every layer above is shared between tags; the label makes each tag's image
        # its own (a real rebuild of the image config, not a retag).
        if is_image "$name"; then
            echo "LABEL kstack.image=\"$name\" kstack.tag=\"$TAG\" kolla_version=\"$KOLLA_VERSION\""
        fi
    } > "$df"
    cp "$df" "$LOGS/$name.Dockerfile"
    step "$name: docker build ($target)" "$LOGS/$name.log" \
        docker build --network host --force-rm -t "$target" -f "$df" "$CTX"
    BUILT[$name]=1
}
# Whether an image installs from the wheelhouse (a venv of its own or below openstack).
needs_wheels() {
    case $1 in openstack|kolla-toolbox) return 0 ;; esac
    case ${PARENT[$1]} in
        "$KB"/*:"$HASH") needs_wheels "$(echo "${PARENT[$1]#"$KB"/}" | cut -d: -f1)" ;;
        *) return 1 ;;
    esac
}
for image in "${IMAGES[@]}"; do
    [ -n "${PARENT[$image]:-}" ] || die "$image: no Dockerfile in images.sh"
done
# First what needs no wheels (kolla-base is the long one), while the wheels are built.
for image in "${IMAGES[@]}"; do
    needs_wheels "$image" || build "$image"
done
wait "$WHEELBUILD_PID" || die "building wheels from sdists failed (see above)"
WHEELBUILD_PID=
start_wheel_server
for image in "${IMAGES[@]}"; do
    build "$image"
done

# --- save ----------------------------------------------------------------------------------------
refs=()
for image in "${IMAGES[@]}"; do refs+=("$(ref "$image")"); done
mkdir -p "$OUT.tmp"
printf '%s\n' "${refs[@]}" > "$OUT.tmp/images.txt"
step "docker save of ${#refs[@]} images" "$LOGS/save.log" docker save -o "$OUT.tmp/images.tar" "${refs[@]}"
{
    echo "# image  size (docker, MB, layers shared between images are counted in each)"
    for r in "${refs[@]}"; do
        printf '%s %s\n' "$r" "$(( $(docker image inspect -f '{{.Size}}' "$r") / 1000000 ))"
    done
    printf 'images.tar %s\n' "$(( $(stat -c %s "$OUT.tmp/images.tar") / 1000000 ))"
} > "$LOGS/sizes.txt"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"

# Logs of builds that never finished go; old results and the daemon's images of other builds go,
# the newest KEEP results stay.
for logs in "$RESULTS"/*.logs; do
    if [ -d "$logs" ] && [ ! -d "${logs%.logs}" ]; then rm -rf "$logs"; fi
done
# shellcheck disable=SC2012
ls -1dt "$RESULTS"/*/images.tar 2>/dev/null | tail -n +"$((KEEP + 1))" | while read -r old; do
    old=${old%/images.tar}
    rm -rf "$old" "$old.logs"
done
docker images --format '{{.Repository}}:{{.Tag}}' | grep "^$KB/" | grep -v -e ":$HASH\$" -e ":$BASE_KEY\$" \
    | xargs -r "$DOCKER_BIN" -H "unix://$DOCKER_SOCK" rmi >/dev/null 2>&1 || true

log "built ${#refs[@]} images in $(( $(date +%s) - START )) s; images.tar $(( $(stat -c %s "$OUT/images.tar") / 1000000 )) MB"
echo "$OUT"
