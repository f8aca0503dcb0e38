#!/usr/bin/env bash
# Runs OpenStack's own test suite, tempest (43.0.0, the 2025.1 release, with the neutron, heat
# and cinder plugins of that cycle), against the cloud kstack deployed:
#
#   bash hack/tempest.sh [--smoke | --regex R | --all] [--no-run] [-- extra `tempest run` args]
#
#   --smoke      tempest's smoke tests (the default)
#   --regex R    the tests whose id matches R (e.g. '^heat_tempest_plugin\.tests\.api')
#   --all        every test tempest and the plugins have (hours on this machine)
#   --no-run     build the venv, write tempest.conf and stop (prints the workspace)
#   --venv-only  build (or find) the venv, print its path and stop
#   --external-subnet CIDR
#                when the cloud has no external network, make one (public1, flat on physnet1,
#                this IPv4 subnet, its first address the gateway) and keep it: floating IPs and
#                validation over SSH need one (on the dev cluster's real node: 172.24.4.0/24)
#   --cleanup    delete what an interrupted run left: the resources of projects named tempest-*,
#                those projects, and users, groups, roles, domains named tempest-* (nothing else)
#   -- ARGS      passed to `tempest run` after the script's own (a later --concurrency wins)
#
# 1. A Python venv cached under ${KSTACK_CACHE:-~/.cache/kstack}/tempest-venv-<hash of
#    hack/tempest/requirements.txt, upper-constraints.txt (2025.1's) and the Python version>.
# 2. The catalog's endpoints are cluster DNS names (keystone.openstack.svc ...). This script
#    does not edit /etc/hosts: it writes the namespace's Services' ClusterIPs to a hosts-format
#    file in the workspace, and hack/tempest/kstack_resolve.py (loaded by a .pth file in the
#    venv, so in tempest and each of its workers) answers those names from it.
# 3. hack/tempest/gen_conf.py writes tempest.conf from the live cloud (auth from the config
#    directory's passwords.yml, flavors and images it creates or finds, feature flags from the
#    catalog, the API versions and neutron's extensions).
# 4. `tempest run` (--concurrency 2, object storage excluded: the cloud has no swift) in the
#    workspace ${KSTACK_TEMPEST_WORKSPACE:-$KSTACK_CACHE/tempest/workspace}; the summary,
#    each failure and skip with its reason, and the path of the run's subunit stream are printed.
#    Exit status: tempest's (non-zero when a test failed).
#
# Environment: KUBECONFIG (else `kstack dev kubeconfig`), KSTACK_CONFIG_DIR (default
# ~/.config/kstack), KSTACK_NAMESPACE (default openstack), KSTACK_TEMPEST_PYTHON (a python3
# between 3.9 and 3.12, default: the first found).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
tdir=$here/tempest
cache=${KSTACK_CACHE:-$HOME/.cache/kstack}
export KSTACK_CONFIG_DIR=${KSTACK_CONFIG_DIR:-$HOME/.config/kstack}
ns=${KSTACK_NAMESPACE:-openstack}

select=(--smoke)
run=1
venv_only=0
cleanup=0
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --smoke) select=(--smoke) ;;
    --regex) [ $# -ge 2 ] || { echo "tempest.sh: --regex needs a value" >&2; exit 2; }
      select=(--regex "$2"); shift ;;
    --regex=*) select=(--regex "${1#--regex=}") ;;
    --all) select=() ;;
    --external-subnet) [ $# -ge 2 ] || { echo "tempest.sh: --external-subnet needs a value" >&2; exit 2; }
      export KSTACK_TEMPEST_EXTERNAL_SUBNET=$2; shift ;;
    --external-subnet=*) export KSTACK_TEMPEST_EXTERNAL_SUBNET=${1#--external-subnet=} ;;
    --no-run) run=0 ;;
    --venv-only) venv_only=1 ;;
    --cleanup) cleanup=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "tempest.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

log() { echo "tempest.sh: $*" >&2; }

# --- 1. the venv -------------------------------------------------------------------------
pick_python() {
  local c
  for c in ${KSTACK_TEMPEST_PYTHON:-} python3 python3.12 python3.11 python3.10 python3.9 /usr/bin/python3; do
    command -v "$c" >/dev/null 2>&1 || continue
    if "$c" -c 'import sys, venv; sys.exit(not ((3, 9) <= sys.version_info[:2] <= (3, 12)))' 2>/dev/null; then
      command -v "$c"; return 0
    fi
  done
  log "no python3 between 3.9 and 3.12 with the venv module (2025.1's upper-constraints are for those)"
  return 1
}
py=$(pick_python)
pyver=$("$py" -c 'import sys, platform; print(sys.version.split()[0], platform.machine())')
hash=$( { cat "$tdir/requirements.txt" "$tdir/upper-constraints.txt"; echo "$pyver"; } | sha256sum | cut -c1-12)
venv=$cache/tempest-venv-$hash
mkdir -p "$cache"
exec 9>"$cache/tempest-venv.lock"
flock 9
if [ ! -f "$venv/.kstack-complete" ]; then
  log "building $venv (Python $pyver; tempest and plugins from PyPI with 2025.1's upper-constraints)"
  start=$(date +%s)
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip >&2
  "$venv/bin/pip" install -q --disable-pip-version-check \
    -c "$tdir/upper-constraints.txt" -r "$tdir/requirements.txt" >&2
  "$venv/bin/python" -c 'import tempest, neutron_tempest_plugin, heat_tempest_plugin, cinder_tempest_plugin, openstack' 
  touch "$venv/.kstack-complete"
  log "venv built in $(( $(date +%s) - start )) s"
else
  log "venv $venv (cached)"
fi
# The resolver hook (kstack_resolve.py) is copied on every run, so editing it needs no rebuild.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cmp -s "$tdir/kstack_resolve.py" "$site/kstack_resolve.py" || cp "$tdir/kstack_resolve.py" "$site/kstack_resolve.py"
echo "import kstack_resolve" > "$site/kstack_resolve.pth"
flock -u 9
if [ "$venv_only" = 1 ]; then echo "$venv"; exit 0; fi
export PATH=$venv/bin:$PATH

# --- 2. the cluster and the names of the catalog ---------------------------------------------
if [ -z "${KUBECONFIG:-}" ]; then
  for k in "${KSTACK:-}" "$root/target/debug/kstack" "${CARGO_TARGET_DIR:-/nonexistent}/debug/kstack" \
           "$cache/target/debug/kstack" "$(command -v kstack || true)"; do
    if [ -n "$k" ] && [ -x "$k" ]; then KUBECONFIG=$("$k" dev kubeconfig) && break; fi
  done
  [ -n "${KUBECONFIG:-}" ] || { log "set KUBECONFIG (no kstack binary found to ask \`kstack dev kubeconfig\`)"; exit 1; }
  export KUBECONFIG
fi
ws=${KSTACK_TEMPEST_WORKSPACE:-$cache/tempest/workspace}
if [ ! -f "$ws/etc/tempest.conf" ] && [ ! -d "$ws/.stestr" ]; then
  mkdir -p "$(dirname "$ws")"
  rm -rf "$ws"
  # A workspace registry of our own: tempest init records workspaces in ~/.tempest otherwise.
  # One name per workspace path; an entry whose directory is gone is dropped first (tempest
  # init refuses a name it has).
  wsname=kstack-$(printf '%s' "$ws" | sha256sum | cut -c1-12)
  tempest workspace remove --workspace-path "$cache/tempest/workspaces.yaml" --name "$wsname" \
    >/dev/null 2>&1 || true
  tempest init --workspace-path "$cache/tempest/workspaces.yaml" --name "$wsname" "$ws" \
    >"$cache/tempest/init.log" 2>&1 || { cat "$cache/tempest/init.log" >&2; exit 1; }
fi
mkdir -p "$ws/etc"
export KSTACK_TEMPEST_HOSTS=$ws/etc/hosts

# --- 3. the guest image, if the project can build one ---------------------------------------
guest_args=()
if [ -f "$root/hack/guest.sh" ]; then
  log "building the guest (hack/guest.sh)"
  if gout=$(bash "$root/hack/guest.sh" </dev/null); then
    gdir=$(printf '%s\n' "$gout" | tail -n 1)
    if [ -f "$gdir/disk.raw" ]; then
      guest_args=(--guest-dir "$gdir")
    else
      log "hack/guest.sh's last line ($gdir) is not a directory with disk.raw: a plain raw image, validation off"
    fi
  else
    log "hack/guest.sh failed: a plain raw image, validation off"
  fi
fi

log "writing $ws/etc/tempest.conf from the cloud"
python "$tdir/gen_conf.py" --namespace "$ns" --config-dir "$KSTACK_CONFIG_DIR" \
  --hosts-file "$KSTACK_TEMPEST_HOSTS" --out "$ws/etc/tempest.conf" \
  --image-cache "$cache/tempest" "${guest_args[@]}" >&2
if [ "$run" = 0 ]; then echo "$ws"; exit 0; fi
if [ "$cleanup" = 1 ]; then python "$tdir/cleanup.py"; exit 0; fi

# --- 4. tempest run ---------------------------------------------------------------------------
# The scenarios ping guests' floating IPs from this machine.
command -v ping >/dev/null || { log "no ping on this machine (Debian: iputils-ping; bash hack/deps.sh installs it)"; exit 1; }
cd "$ws"
# HTTPS public endpoints: gen_conf.py wrote the CA that signs them as etc/ca.crt; the clients
# without a CA option (the dashboard test's) take it from here.
if [ -f "$ws/etc/ca.crt" ]; then export SSL_CERT_FILE=$ws/etc/ca.crt; fi
start=$(date +%s)
rc=0
tempest run "${select[@]}" --concurrency 2 \
  --exclude-regex '(^tempest\.api\.object_storage|object_storage|ObjectStorage)' "${extra[@]}" || rc=$?
secs=$(( $(date +%s) - start ))
mkdir -p "$ws/runs"
subunit=$ws/runs/$(date -u +%Y%m%dT%H%M%SZ).subunit
if stestr last --subunit >"$subunit" 2>/dev/null && [ -s "$subunit" ]; then
  ln -sfn "$subunit" "$ws/last-run.subunit"
  python "$tdir/summarize.py" "$subunit" || true
  echo "tempest.sh: subunit stream of this run: $subunit (also $ws/last-run.subunit; every run: stestr in $ws; tempest.log in $ws/logs)"
else
  rm -f "$subunit"
  log "no subunit stream for this run (tempest found no tests, or did not start)"
fi
echo "tempest.sh: tempest run took ${secs} s, exit status $rc"
exit "$rc"
