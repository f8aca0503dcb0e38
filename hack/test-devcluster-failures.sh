#!/usr/bin/env bash
# Failure behaviour of the local control plane: each case must end with a clear message, a
# non-zero exit, and no process of ours left running.
set -uo pipefail
cd "$(dirname "$0")/.."
fails=0 passes=0
T=$(mktemp -d); trap 'rm -rf "$T"; kill "${HOLDER:-}" 2>/dev/null || true' EXIT
strays() { pgrep -f "$T/dev" >/dev/null; }
check() { # check NAME EXPECTED-SUBSTRING RC OUTPUT
  if [ "$3" -ne 0 ] && grep -qF -- "$2" <<<"$4" && ! strays; then
    echo "ok   $1"; passes=$((passes + 1))
  else
    echo "FAIL $1 (rc=$3): $4"; fails=$((fails + 1))
  fi
}

# 1. A port already in use.
python3 -c 'import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 27440)); s.listen(); time.sleep(120)' &
HOLDER=$!; sleep 0.5
out=$(KSTACK_DEV_DIR=$T/dev KSTACK_DEV_PORT_BASE=27440 bash hack/devcluster.sh up --real-nodes 0 2>&1); rc=$?
check "port in use" "port 127.0.0.1:27440 is already in use" $rc "$out"
kill $HOLDER 2>/dev/null; HOLDER=

# 1b. The host state (the services' hostPath data) of one dev cluster survives another's up
#     and purge: parked while the other runs, put back when this one comes up again.
hs() { KSTACK_HOST_STATE=$T/hs KSTACK_HOST_PARKED=$T/parked KSTACK_DEV_DIR=$1 bash hack/realnode.sh host-state "$2" 2>/dev/null; }
hs "$T/main" take && mkdir -p "$T/hs/nova" && echo id-main >"$T/hs/nova/compute_id" && mkdir -p "$T/hs/volumes/x"
hs "$T/tests" take && [ ! -e "$T/hs/nova" ] && echo id-tests >"$T/hs/nova-tests" && hs "$T/tests" purge
ok=$?
hs "$T/main" take
if [ $ok -eq 0 ] && [ "$(cat "$T/hs/nova/compute_id" 2>/dev/null)" = id-main ] && [ ! -e "$T/hs/nova-tests" ] && [ -d "$T/hs/volumes/x" ]; then
  echo "ok   another cluster's up and purge keep this cluster's host state"; passes=$((passes + 1))
else
  echo "FAIL another cluster's up and purge keep this cluster's host state: $(cd "$T" && find hs parked 2>&1 | tr '\n' ' ')"; fails=$((fails + 1))
fi
hs "$T/main" purge
if [ -z "$(find "$T/hs" -mindepth 1 ! -path "$T/hs/volumes*" 2>/dev/null)" ] && [ ! -e "$T/parked" ]; then
  echo "ok   a purge deletes its own host state"; passes=$((passes + 1))
else
  echo "FAIL a purge deletes its own host state: $(cd "$T" && find hs parked 2>&1 | tr '\n' ' ')"; fails=$((fails + 1))
fi

# 2. No Go toolchain (and nothing cached for these versions).
out=$(env PATH=/usr/bin:/bin KSTACK_CACHE_DIR=$T/cache KSTACK_DEV_DIR=$T/dev KSTACK_DEV_PORT_BASE=27450 bash hack/devcluster.sh up --real-nodes 0 2>&1); rc=$?
check "missing Go toolchain" "the Go toolchain is missing" $rc "$out"

# 3. A complete cache needs no Go toolchain.
mkdir -p "$T/cache/bin"; BIN=$(bash hack/build-k8s.sh 2>/dev/null); cp -a "$BIN" "$T/cache/bin/"
out=$(env PATH=/usr/bin:/bin KSTACK_CACHE_DIR=$T/cache bash hack/build-k8s.sh 2>&1); rc=$?
if [ $rc -eq 0 ]; then echo "ok   complete cache starts without Go"; passes=$((passes + 1)); else echo "FAIL complete cache starts without Go: $out"; fails=$((fails + 1)); fi

# 4. A half-built cache: a truncated binary is detected and not used. With Go hidden, the rebuild
#    cannot happen, so the message must name the broken state instead of starting a broken binary.
: >"$T/cache/bin/$(basename "$BIN")/kube-apiserver"
out=$(env PATH=/usr/bin:/bin KSTACK_CACHE_DIR=$T/cache KSTACK_DEV_DIR=$T/dev KSTACK_DEV_PORT_BASE=27460 bash hack/devcluster.sh up --real-nodes 0 2>&1); rc=$?
check "half-built cache is not used" "kube-apiserver missing or broken" $rc "$out"
out=$(KSTACK_CACHE_DIR=$T/cache bash hack/build-k8s.sh 2>&1); rc=$?
if [ $rc -eq 0 ] && "$T/cache/bin/$(basename "$BIN")/kube-apiserver" --version >/dev/null 2>&1; then
  echo "ok   half-built cache is rebuilt"; passes=$((passes + 1))
else
  echo "FAIL half-built cache is rebuilt: $out"; fails=$((fails + 1))
fi

# 5. A real node without containerd names what is missing and how to install it, and starts
#    nothing.
out=$(KSTACK_CONTAINERD=$T/no-such-containerd KSTACK_DEV_DIR=$T/dev KSTACK_DEV_PORT_BASE=27470 bash hack/devcluster.sh up 2>&1); rc=$?
check "real node without containerd" "missing: containerd ($T/no-such-containerd)" $rc "$out"

# 6. A bad --real-nodes value.
out=$(KSTACK_DEV_DIR=$T/dev KSTACK_DEV_PORT_BASE=27480 bash hack/devcluster.sh up --real-nodes 4 2>&1); rc=$?
check "four real nodes refused" "--real-nodes must be 0 to 3" $rc "$out"

# 7. The cluster's data outlives a dead API server, `up` and `down`; only `down --purge` drops it.
dev() { KSTACK_DEV_DIR=$T/dev7 KSTACK_DEV_PORT_BASE=27490 bash hack/devcluster.sh "$@"; }
kc() { "$BIN/kubectl" --kubeconfig="$T/dev7/kubeconfig" "$@"; }
result() { # result NAME OK-CONDITION-RC DETAILS
  if [ "$2" -eq 0 ]; then echo "ok   $1"; passes=$((passes + 1)); else echo "FAIL $1: $3"; fails=$((fails + 1)); fi
}
if dev up --nodes control=1 --real-nodes 0 >/dev/null 2>"$T/up7.log" && kc create namespace kept >/dev/null 2>&1; then
  kill -9 "$(cat "$T/dev7/pids/kube-apiserver")"
  st=$(dev status 2>&1); rc=$?
  # Just killed, its PID may not be reaped yet: stopped, or a PID that answers nothing.
  [ $rc -eq 3 ] && grep -qE "kube-apiserver  *(stopped|running but not answering)" <<<"$st"; result "status names the dead API server" $? "rc=$rc: $st"
  # Without options: the cluster comes back as it was (1 simulated node, no real node).
  out=$(dev up 2>&1 >/dev/null); rc=$?
  [ $rc -eq 0 ] && grep -q "starting again what did not answer: kube-apiserver" <<<"$out" \
    && ! grep -q "did not answer:.*etcd" <<<"$out" && grep -q "reusing the cluster's data" <<<"$out" \
    && grep -q "1 simulated nodes, 0 real" <<<"$out"
  result "up restarts only the dead API server, on the data it had, with the nodes it had" $? "rc=$rc: $out"
  kc get namespace kept >/dev/null 2>&1; result "the namespace survives the API server's death" $? "$(kc get namespace kept 2>&1)"
  dev status >/dev/null 2>&1; result "status: every process answers again" $? "$(dev status 2>&1)"
  dev down >/dev/null 2>&1; dev up --nodes control=1 --real-nodes 0 >/dev/null 2>&1
  kc get namespace kept >/dev/null 2>&1; result "the namespace survives down and up" $? "$(kc get namespace kept 2>&1)"
  dev down --purge >/dev/null 2>&1; dev up --nodes control=1 --real-nodes 0 >/dev/null 2>&1
  ! kc get namespace kept >/dev/null 2>&1; result "down --purge starts an empty cluster" $? "namespace kept still exists"
  dev down --purge >/dev/null 2>&1
  [ ! -e "$T/dev7/etcd-data" ] && ! pgrep -f "$T/dev7" >/dev/null; result "down --purge leaves no data and no process" $? "$(ls "$T/dev7"; pgrep -af "$T/dev7")"
else
  echo "FAIL the cluster for the data cases did not start: $(tail -n 20 "$T/up7.log")"; fails=$((fails + 1))
  dev down --purge >/dev/null 2>&1
fi

# 8. A pid file that outlived its process (a killed run, a machine started from a copy of this
#    disk) while the kernel gave its pid to another process: nothing signals that process.
sleep 300 & VICTIM=$!
mkdir -p "$T/dev8/pids"; echo "$VICTIM" >"$T/dev8/pids/kube-apiserver"
. hack/pidfile.sh
[ "$(pid_in "$T/dev8/pids/kube-apiserver")" = "$VICTIM" ]; result "a fresh pid file names its live process" $? "pid_in: $(pid_in "$T/dev8/pids/kube-apiserver")"
touch -d '1 hour ago' "$T/dev8/pids/kube-apiserver"
[ -z "$(pid_in "$T/dev8/pids/kube-apiserver")" ]; result "a pid file older than its pid's process names nothing" $? "pid_in: $(pid_in "$T/dev8/pids/kube-apiserver")"
st=$(KSTACK_DEV_DIR=$T/dev8 KSTACK_DEV_PORT_BASE=27500 bash hack/devcluster.sh status 2>&1)
grep -qE "kube-apiserver  *stopped" <<<"$st"; result "status calls the stale pid's component stopped" $? "$st"
KSTACK_DEV_DIR=$T/dev8 KSTACK_DEV_PORT_BASE=27500 bash hack/devcluster.sh down >/dev/null 2>&1
kill -0 "$VICTIM" 2>/dev/null && [ ! -e "$T/dev8/pids/kube-apiserver" ]
result "down leaves the process alone and drops the stale pid file" $? "victim $VICTIM: $(kill -0 "$VICTIM" 2>&1 || echo gone); $(ls "$T/dev8/pids")"
kill "$VICTIM" 2>/dev/null

# 9. What nova-libvirt runs outside its container's cgroup (libvirtd, virtlogd, in the cgroup
#    kstack-libvirt) does not outlive the node: the node's stop kills it, and only it.
G=kstack-libvirt-test-$$
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then CG=/sys/fs/cgroup/$G; else CG=/sys/fs/cgroup/pids/$G; fi
sleep 300 & INSIDE=$!; disown "$INSIDE"
sleep 300 & OUTSIDE=$!
if mkdir -p "$CG" 2>/dev/null && echo "$INSIDE" >"$CG/cgroup.procs"; then
  KSTACK_LIBVIRT_CGROUP=$G bash hack/realnode.sh host-state libvirt-leftovers
  sleep 0.5
  ! kill -0 "$INSIDE" 2>/dev/null && kill -0 "$OUTSIDE" 2>/dev/null
  result "the node's stop kills what runs in the cgroup kstack-libvirt, nothing else" $? "in the cgroup: $(kill -0 "$INSIDE" 2>&1 || echo gone); outside: $(kill -0 "$OUTSIDE" 2>&1 || echo gone)"
else
  result "a cgroup can be made under /sys/fs/cgroup (as root)" 1 "mkdir $CG failed"
fi
kill "$INSIDE" "$OUTSIDE" 2>/dev/null; wait "$OUTSIDE" 2>/dev/null
rmdir "$CG" 2>/dev/null

echo "devcluster failures: $passes passed, $fails failed"
[ $fails -eq 0 ]
