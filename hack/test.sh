#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit/snapshot/CLI tests, the inventory service against
# PostgreSQL (when KSTACK_TEST_POSTGRES_URL is set), then the end-to-end tests on a freshly started
# local control plane, which is stopped again afterwards whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."

# Test binaries in a shared target directory outlive the checkout they were compiled in (cargo
# does not rebuild one because the checkout moved), so whatever a test finds by path is found in
# this checkout at run time: insta's snapshots by INSTA_WORKSPACE_ROOT, hack/ scripts by the
# CARGO_MANIFEST_DIR that cargo sets when it runs a test.
export INSTA_WORKSPACE_ROOT=$PWD
# A failing test's message, not an error's async backtrace, is what the end of a log should show:
# anyhow's backtraces are off (RUST_LIB_BACKTRACE=0), a panic's stay as RUST_BACKTRACE says, and
# `tests` repeats every failure's message after the run.
export RUST_LIB_BACKTRACE=0
tests() {
  local log
  log=$(mktemp -t kstack-tests.XXXXXX.log)
  if "$@" 2>&1 | tee "$log"; then rm -f "$log"; return 0; fi
  echo "== what failed in: $* (whole output: $log)"
  awk '/^Error: |panicked at /{p=1} /^[Ss]tack backtrace:/{p=0} p' "$log" | head -n 80
  grep -E '^    [a-z_0-9:]+$|^test result: FAILED' "$log" | tail -n 20
  return 1
}

# Each `phase` line starts a phase; at exit, pass or fail, a table of the phases and their times,
# of the machine's CPU (the share of both cores busy during the phase: what is left for work run
# beside it) and of the disk: free space at each phase's start, and the least free space seen
# during it (a sampler every 10 s). A full disk makes the real node's kubelet delete images, the
# pause image among them (containerd 1.6 does not pin it), so a run that ran short of disk says
# so here.
phase_names=() phase_starts=() phase_free=()
disk_log=$(mktemp -t kstack-disk.XXXXXX.log)
free_mib() { df -Pm "$HOME" 2>/dev/null | awk 'NR == 2 { print $4 }'; }
# Busy and total jiffies of all CPUs (idle and iowait count as not busy).
cpu_jiffies() { awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
echo "$SECONDS $(free_mib) $(cpu_jiffies)" >"$disk_log"
( while sleep 10; do echo "$SECONDS $(free_mib) $(cpu_jiffies)"; done >>"$disk_log" ) &
disk_pid=$!
phase() { echo "== $*"; phase_names+=("$*"); phase_starts+=("$SECONDS"); phase_free+=("$(free_mib)"); }
phases() {
  local i n=${#phase_names[@]} end least
  kill "$disk_pid" 2>/dev/null || true
  [ "$n" -gt 0 ] || return 0
  echo "== phases (seconds taken, seconds from the start, CPU busy, GiB free at the start, least GiB free during)"
  for ((i = 0; i < n; i++)); do
    end=$SECONDS; [ $((i + 1)) -lt "$n" ] && end=${phase_starts[$((i + 1))]}
    least=$(awk -v a="${phase_starts[$i]}" -v b="$end" -v f="${phase_free[$i]}" \
      'BEGIN { m = f } $1 >= a && $1 <= b && $2 < m { m = $2 } END { printf "%.1f", m / 1024 }' "$disk_log")
    # From the last sample before the phase to the last one in it ("-" under 10 s).
    busy=$(awk -v a="${phase_starts[$i]}" -v b="$end" \
      '$1 <= a && NF == 4 { b0 = $3; t0 = $4 } $1 > a && $1 <= b && NF == 4 { b1 = $3; t1 = $4 }
       END { if (t0 != "" && t1 > t0) printf "%d%%", 100 * (b1 - b0) / (t1 - t0); else printf "-" }' "$disk_log")
    printf '%6ds  %6ds  %4s  %6.1f  %6s  %s\n' "$((end - phase_starts[i]))" "$end" "$busy" \
      "$(awk -v f="${phase_free[$i]}" 'BEGIN { printf "%.1f", f / 1024 }')" "$least" "${phase_names[$i]}"
  done
  printf '%6ds  total\n' "$SECONDS"
  echo "== disk at the end: $(df -h "$HOME" | awk 'NR == 2 { print $3 " used, " $4 " free of " $2 }')"
  du -sh "$HOME/.cache/kstack"/* 2>/dev/null | sort -h | tail -n 8 | sed 's/^/   /'
}

# The cloud's images (cached by their inputs) build in the background while the compilers run:
# the real-node end-to-end test deploys the previous release (2024.2) and upgrades it to the
# default one (2025.1); the single node on Docker runs the default one. Their logs are kept for
# a failure; each one's last line is its output directory.
images_log=$(mktemp -t kstack-images.XXXXXX.log)
old_log=$(mktemp -t kstack-images-2024.2.XXXXXX.log)
( bash hack/images.sh >"$images_log" 2>&1 && bash hack/images.sh --release 2024.2 >"$old_log" 2>&1 ) &
images_pid=$!
trap 'kill $images_pid 2>/dev/null || true; phases' EXIT
# Tempest's venv (PyPI, cached by its pins) for the real-node test's tempest run: hack/tempest.sh
# takes a lock, so that run waits for this build and then finds it.
tempest_venv_log=$(mktemp -t kstack-tempest-venv.XXXXXX.log)
bash hack/tempest.sh --venv-only >"$tempest_venv_log" 2>&1 &

phase "cargo fmt --check"
cargo fmt --all -- --check
# Clippy lints the workspace's crates while they are compiled for the tests: clippy-driver is
# rustc's wrapper for the workspace's own crates (what `cargo clippy` runs, there in check mode)
# and CLIPPY_ARGS its `-- -D warnings`, so a lint or a warning fails the build as
# `cargo clippy --workspace --all-targets -- -D warnings` does, and the crates are compiled once
# instead of once for clippy and once for the tests. Every later cargo command of this script
# builds with the same wrapper, so none of them compiles the workspace again.
RUSTC_WORKSPACE_WRAPPER=$(command -v clippy-driver) \
  || { echo "hack/test.sh: no clippy-driver on PATH: rustup component add clippy" >&2; exit 1; }
export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# It must be able to fail: the wrapper, called as cargo calls it, refuses a planted lint.
lint_probe=$(mktemp -d)
cat >"$lint_probe/probe.rs" <<'RUST'
fn main() {
    let v = vec![1];
    println!("{}", v.len());
}
RUST
if "$RUSTC_WORKSPACE_WRAPPER" rustc --edition 2021 --crate-type bin -o "$lint_probe/probe" \
    "$lint_probe/probe.rs" >"$lint_probe/out" 2>&1 || ! grep -q 'clippy::useless.vec' "$lint_probe/out"; then
  echo "hack/test.sh: clippy-driver with CLIPPY_ARGS let a planted clippy::useless_vec through:" >&2
  cat "$lint_probe/out" >&2
  exit 1
fi
rm -rf "$lint_probe"
phase "clippy, unit, snapshot and CLI tests (one build)"
tests cargo test --workspace --exclude kstack-e2e
phase "end-to-end test binaries (and their clippy), on the build above"
e2e_build=$(cargo test -p kstack-e2e --no-run 2>&1) || { echo "$e2e_build" >&2; exit 1; }
rebuilt=$(sed -n 's/^ *Compiling \([^ ]*\) .*/\1/p' <<<"$e2e_build" | grep -v '^kstack' || true)
if [ -n "$rebuilt" ]; then
  echo "note: the end-to-end tests compiled $(wc -w <<<"$rebuilt") shared crates again, as their" \
    "features differ from the workspace's (align them in crates/kstack-e2e/Cargo.toml):" $rebuilt
fi

phase "Compose target output against the Compose specification schema"
cargo build -q --bin kstack
bash hack/compose-validate.sh

phase "generated OpenStack config files accepted by oslo-config-validator (2025.1 projects)"
bash hack/test-oslo-validate.sh
kstack() { cargo run -q --bin kstack -- "$@"; }
# The whole cloud (cinder too) rendered from a starter config directory; finding no oslo file fails.
oslo_dir=$(mktemp -d)
kstack init "$oslo_dir/etc" >/dev/null
echo 'enable_cinder: "yes"' >>"$oslo_dir/etc/globals.yml"
kstack genpwd --config-dir "$oslo_dir/etc" >/dev/null
kstack template --config-dir "$oslo_dir/etc" --config-files "$oslo_dir/files" >/dev/null
bash hack/oslo-validate.sh "$oslo_dir/files" || { echo "rendered files kept in $oslo_dir/files" >&2; exit 1; }
phase "WSGI entry points of the rendered files exist in the 2025.1 projects"
bash hack/wsgi-check.sh "$oslo_dir/files" || { echo "rendered files kept in $oslo_dir/files" >&2; exit 1; }
rm -rf "$oslo_dir"
phase "per distribution, config.json commands and paths as kolla-ansible 2025.1 renders them"
bash hack/distro-parity.sh "${CARGO_TARGET_DIR:-$PWD/target}/debug/kstack"
phase "every password read back exactly from the rendered files by the services' own parsers"
bash hack/escape-check.sh

phase "fuzzing the config loaders (cargo fuzz, ${KSTACK_FUZZ_SECONDS:-20}s per target)"
bash hack/fuzz.sh "${KSTACK_FUZZ_SECONDS:-20}"

phase "local control plane failure behaviour"
bash hack/test-devcluster-failures.sh

phase "three real nodes on this machine: pods and Services across nodes, shrink, purge"
bash hack/test-realnodes.sh

phase "end-to-end tests on the local control plane"
export KSTACK_DEV_DIR=${KSTACK_DEV_DIR:-$HOME/.cache/kstack/dev-test}
# A cluster of its own on free ports, so a developer's running `kstack dev up` is left alone.
free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ -z "${KSTACK_DEV_PORT_BASE:-}" ]; then
  for base in $(seq 26440 10 26940); do
    ok=1; for off in 0 1 2 3 4 5; do free $((base + off)) || { ok=0; break; }; done
    if [ $ok = 1 ]; then export KSTACK_DEV_PORT_BASE=$base; break; fi
  done
fi
trap 'kill $images_pid 2>/dev/null || true; bash hack/devcluster.sh down --purge >/dev/null 2>&1 || true; bash hack/docker.sh down >/dev/null 2>&1 || true; phases' EXIT
bash hack/devcluster.sh down --purge >/dev/null 2>&1 || true
# Simulated nodes for what Kubernetes decides, and the real node (role labels
# kstack.io/real-role-*) for what the containers decide.
KSTACK_E2E_KUBECONFIG=$(bash hack/devcluster.sh up)
export KSTACK_E2E_KUBECONFIG KSTACK_E2E_REAL_ROLE_PREFIX=kstack.io/real-role-
phase "the cloud's images (hack/images.sh, started at the beginning)"
if ! wait "$images_pid"; then
  echo "building the images failed; last lines of $images_log and $old_log:" >&2
  tail -n 40 "$images_log" "$old_log" >&2
  exit 1
fi
bash hack/devcluster.sh import "$(tail -n 1 "$images_log")"
bash hack/devcluster.sh import "$(tail -n 1 "$old_log")"
# The real-node test grows the cluster to a second real node and imports the images there.
KSTACK_E2E_IMAGES=$(tail -n 1 "$images_log")
export KSTACK_E2E_IMAGES
# The guest the real-node test boots (a whole disk: boot loader, kernel, an initramfs with
# busybox, a DHCP client and an SSH server; cached by its inputs): it must get its lease and
# metadata through the router.
KSTACK_E2E_GUEST_IMAGE=$(bash hack/guest.sh | tail -n 1)
export KSTACK_E2E_GUEST_IMAGE
cargo build -q --bin kstack   # the deploy tests run the binary (and kill it)

phase "end-to-end tests on simulated nodes, beside the single node on a Docker engine"
# Two clouds that use different parts of the machine, at once: the simulated-node tests use the
# control plane and no real pod, the single node on Docker (deploy, verify, reconfigure one
# service, verify) uses the node's own address and both cores' leftovers. Both clouds would use
# the node's ports and host devices (Open vSwitch's bridges, the routers' namespaces), so the
# Docker one ends before the real node's first pod. The engine keeps the loaded images under
# ~/.cache/kstack/compose-docker for the next run.
docker_log=$(mktemp -t kstack-docker-node.XXXXXX.log)
(
  engine=$(bash hack/docker.sh up "$(tail -n 1 "$images_log")") || exit 1
  eval "$(grep '^export ' <<<"$engine")"
  KSTACK_E2E_DOCKER=1 tests cargo test -p kstack-e2e --test compose_node -- --nocapture
) >"$docker_log" 2>&1 &
docker_pid=$!
# Every test binary of the crate but the real-node ones and the Docker one (run above).
real_tests=(real_cloud real_ha)
simulated=()
for f in crates/kstack-e2e/tests/*.rs; do
  t=$(basename "$f" .rs)
  case " ${real_tests[*]} compose_node " in *" $t "*) ;; *) simulated+=(--test "$t") ;; esac
done
sim_rc=0
tests cargo test -p kstack-e2e --lib "${simulated[@]}" -- --nocapture || sim_rc=$?
docker_rc=0
wait "$docker_pid" || docker_rc=$?
echo "== the single node on a Docker engine (ran beside the tests above)"
cat "$docker_log"
# The single node's host state goes (every run starts it empty, as its test empties its
# volumes); the real node takes its own back before its first pod.
bash hack/docker.sh down --purge-state
bash hack/realnode.sh host-state take
[ "$sim_rc" = 0 ] && [ "$docker_rc" = 0 ] || exit 1

phase "end-to-end tests on the real node (real_cloud with tempest smoke, then grown to a second real node; real_ha), beside schemathesis"
# Schemathesis fuzzes the inventory service (a process of its own on a free port, its own
# database) while the real node works: it needs only the control plane, and the real-node tests
# wait on their pods most of the time. Its log is printed after them.
schemathesis_log=$(mktemp -t kstack-schemathesis.XXXXXX.log)
(
  set -e
  echo "== schemathesis against the inventory service's OpenAPI document (no 5xx), SQLite"
  SCHEMATHESIS_MAX_TIME=${SCHEMATHESIS_MAX_TIME:-60} bash hack/schemathesis.sh "$KSTACK_E2E_KUBECONFIG"
  if [ -n "${KSTACK_TEST_POSTGRES_URL:-}" ]; then
    echo "== schemathesis against the inventory service on PostgreSQL (no 5xx)"
    st_schema=schemathesis_$$
    psql -q "$KSTACK_TEST_POSTGRES_URL" -c "CREATE SCHEMA $st_schema"
    SCHEMATHESIS_DATABASE="$KSTACK_TEST_POSTGRES_URL?options=-c%20search_path%3D$st_schema" \
      SCHEMATHESIS_MAX_TIME=${SCHEMATHESIS_MAX_TIME:-45} bash hack/schemathesis.sh "$KSTACK_E2E_KUBECONFIG"
    psql -q "$KSTACK_TEST_POSTGRES_URL" -c "DROP SCHEMA $st_schema CASCADE"
  fi
) >"$schemathesis_log" 2>&1 &
schemathesis_pid=$!
real_rc=0
tests cargo test -p kstack-e2e $(printf -- '--test %s ' "${real_tests[@]}") -- --nocapture || real_rc=$?
schemathesis_rc=0
wait "$schemathesis_pid" || schemathesis_rc=$?
echo "== schemathesis (ran beside the real-node tests)"
cat "$schemathesis_log"
[ "$real_rc" = 0 ] && [ "$schemathesis_rc" = 0 ] || exit 1
