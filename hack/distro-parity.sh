#!/usr/bin/env bash
# Checks, for each base distribution of the Kolla images (every kolla_base_distro kstack knows,
# as `kstack template --distro-facts` prints kstack-model's table; this script keeps no list of
# its own), that the config.json kstack renders for each container (command, config file
# destinations, owners and modes, permissions) and the distribution-dependent paths of its
# config files match what kolla-ansible 2025.1 renders for the same distribution and globals.yml.
# Both targets are checked (Kubernetes and Compose). Differences kstack makes on purpose are
# listed with their reason in hack/distro-parity/known-differences.yaml; one that depends on the
# distribution can never be listed. See hack/distro-parity/compare.py.
#
# Then, for debian (the distribution of kstack's images) and the Kubernetes target, it compares
# the options of the INI config files (keystone.conf, nova.conf per nova service, neutron.conf
# and the agents' files, ...) with kolla-ansible's, section by section; the differences kstack
# makes on purpose are listed in hack/distro-parity/known-config-differences.yaml. See
# hack/distro-parity/compare_ini.py.
#
#   bash hack/distro-parity.sh [KSTACK_BIN]
#
# KSTACK_BIN defaults to the workspace's debug build (`cargo build --bin kstack`); this script
# builds nothing. Exit status: 0 no difference outside the list, 1 a difference, a stale or
# refused list entry or a kolla-ansible template that does not render, 2 bad usage.
#
# The first run creates a venv with kolla-ansible and Jinja2 (hack/distro-parity/requirements.txt)
# under ~/.cache/kstack/venv-parity-<hash of the pins>; later runs reuse it. pip's download cache
# is ~/.cache/kstack/pip.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -gt 1 ]; then
  echo "usage: $0 [KSTACK_BIN]" >&2
  exit 2
fi
kstack=${1:-${CARGO_TARGET_DIR:-$root/target}/debug/kstack}
if [ ! -x "$kstack" ]; then
  echo "distro-parity: no kstack binary at $kstack (build it with cargo build --bin kstack)" >&2
  exit 2
fi

venv=$(bash "$root/hack/distro-parity/venv.sh")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Runs a kstack command quietly, showing its output only when it fails.
quiet() {
  local out
  out=$("$@" 2>&1) || { echo "$out" >&2; echo "distro-parity: failed: $*" >&2; return 1; }
}
# The passwords do not depend on the distribution: generated once (the SSH keys take seconds).
quiet "$kstack" init "$work/passwords"
quiet "$kstack" genpwd --config-dir "$work/passwords"
# The distributions: kstack's table (compare.py reads the same file).
"$kstack" template --distro-facts >"$work/distro-facts.json"
distros=$("$venv/bin/python" -c 'import json, sys; print(" ".join(d["name"] for d in json.load(open(sys.argv[1]))))' \
  "$work/distro-facts.json")
for distro in $distros; do
  dir=$work/$distro
  quiet "$kstack" init "$dir/etc"
  # kolla-ansible needs the internal VIP; as its only host's API address it is also where the
  # Compose target's services listen.
  printf 'kolla_base_distro: %s\nenable_cinder: "yes"\nkolla_internal_vip_address: 192.0.2.10\n' \
    "$distro" >>"$dir/etc/globals.yml"
  cp -p "$work/passwords/passwords.yml" "$dir/etc/passwords.yml"
  quiet "$kstack" template --config-dir "$dir/etc" --config-files "$dir/kubernetes" -o yaml
  quiet "$kstack" template --config-dir "$dir/etc" --target compose -o "$dir/compose"
done
ansible=$venv/share/kolla-ansible/ansible
status=0
"$venv/bin/python" "$root/hack/distro-parity/compare.py" "$ansible" \
  "$root/hack/distro-parity/known-differences.yaml" "$work" || status=$?
# The options of the INI files, for the images' distribution and the Kubernetes target.
"$venv/bin/python" "$root/hack/distro-parity/compare_ini.py" "$ansible" \
  "$root/hack/distro-parity/known-config-differences.yaml" "$work/debian" || {
  s=$?
  [ "$status" -ge "$s" ] || status=$s
}
exit "$status"
