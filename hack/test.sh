#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit/snapshot/CLI tests, the inventory service against
# PostgreSQL (when KSTACK_TEST_POSTGRES_URL is set), then the end-to-end tests on a freshly started
# local control plane, which is stopped again afterwards whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -q -- -D warnings
echo "== unit, snapshot and CLI tests"
cargo test --workspace --exclude kstack-e2e

echo "== local control plane failure behaviour"
bash hack/test-devcluster-failures.sh

echo "== end-to-end tests on the local control plane"
export KSTACK_DEV_DIR=${KSTACK_DEV_DIR:-$HOME/.cache/kstack/dev-test}
# A cluster of its own on free ports, so a developer's running `kstack dev up` is left alone.
free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ -z "${KSTACK_DEV_PORT_BASE:-}" ]; then
  for base in $(seq 26440 10 26940); do
    ok=1; for off in 0 1 2 3 4 5; do free $((base + off)) || { ok=0; break; }; done
    if [ $ok = 1 ]; then export KSTACK_DEV_PORT_BASE=$base; break; fi
  done
fi
trap 'bash hack/devcluster.sh down >/dev/null 2>&1 || true' EXIT
bash hack/devcluster.sh down >/dev/null 2>&1 || true
KSTACK_E2E_KUBECONFIG=$(bash hack/devcluster.sh up)
export KSTACK_E2E_KUBECONFIG
cargo build -q --bin kstack   # the deploy tests run the binary (and kill it)
cargo test -p kstack-e2e

echo "== schemathesis against the inventory service's OpenAPI document (no 5xx)"
cargo build -q --bin kstack
SCHEMATHESIS_MAX_TIME=${SCHEMATHESIS_MAX_TIME:-60} bash hack/schemathesis.sh "$KSTACK_E2E_KUBECONFIG"
