#!/usr/bin/env bash
# Reads every password back out of kstack's rendered files with the parsers the services use
# (oslo.config, PyYAML, json, Python's own parser), for passwords holding the characters each
# format escapes: see hack/escape/check.py. Uses the oslo venv (hack/oslo/venv.sh) and the
# kstack binary of the workspace's debug build (built here if needed).
#
#   bash hack/escape-check.sh
#
# Exit status: 0 every password read back exactly, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(bash hack/oslo/venv.sh)
cargo build -q --bin kstack
kstack=${CARGO_TARGET_DIR:-$PWD/target}/debug/kstack
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$kstack" init "$work/etc" >/dev/null
# Cinder, and the provider network (its task reads the admin's clouds.yaml: the YAML case).
cat >>"$work/etc/globals.yml" <<'G'
enable_cinder: "yes"
kstack_external_network: "yes"
kstack_external_network_cidr: 172.24.4.0/24
G
"$kstack" genpwd --config-dir "$work/etc" >/dev/null
"$venv/bin/python" hack/escape/check.py "$kstack" "$work/etc" "$work"
