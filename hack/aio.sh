#!/usr/bin/env bash
# The all-in-one job: bring up the local control plane, prepare a config directory (starter
# globals.yml and generated passwords, unless one exists), check it, deploy the whole cloud onto
# the cluster with `kstack deploy` (dependency order, every step gated on real health) and print
# `kstack status`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --bin kstack
KSTACK=$PWD/target/debug/kstack
[ -n "${CARGO_TARGET_DIR:-}" ] && KSTACK=$CARGO_TARGET_DIR/debug/kstack
export KSTACK_CONFIG_DIR=${KSTACK_CONFIG_DIR:-$HOME/.config/kstack}
KUBECONFIG=$("$KSTACK" dev up)
export KUBECONFIG
echo "kubeconfig: $KUBECONFIG" >&2
if [ ! -f "$KSTACK_CONFIG_DIR/globals.yml" ]; then "$KSTACK" init "$KSTACK_CONFIG_DIR"; fi
"$KSTACK" genpwd
"$KSTACK" validate
"$KSTACK" services
"$KSTACK" deploy
"$KSTACK" status
