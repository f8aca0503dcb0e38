#!/usr/bin/env bash
# The all-in-one job: bring up the local control plane, prepare a config directory (starter
# globals.yml and generated passwords, unless one exists), check it, and render the whole cloud into
# the cluster as a server-side dry run (the API server validates and admits every object without
# persisting it; the namespace itself is created for real).
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
KUBECTL=$(bash hack/build-k8s.sh)/kubectl
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
"$KSTACK" template -o yaml >"$OUT/cloud.yaml"
NS=$(awk '/^kind: Namespace/{f=1} f&&/^  name:/{print $2; exit}' "$OUT/cloud.yaml")
"$KUBECTL" create namespace "$NS" --dry-run=client -o yaml | "$KUBECTL" apply --server-side --field-manager=kstack -f - >/dev/null
"$KUBECTL" apply --server-side --field-manager=kstack --dry-run=server -f "$OUT/cloud.yaml" >"$OUT/applied.txt"
echo "server-side dry run accepted $(wc -l <"$OUT/applied.txt") objects into namespace $NS" >&2
