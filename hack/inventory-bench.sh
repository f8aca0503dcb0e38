#!/usr/bin/env bash
# Load benchmark of the inventory service as it runs: `kstack inventory serve` (a release
# build) in its own process, wrk in another, on 127.0.0.1.
#
#   hack/inventory-bench.sh [DATABASE_URL]
#
# DATABASE_URL defaults to a fresh SQLite file; for PostgreSQL pass a postgres:// URL of an
# empty database or schema. The service runs with --no-node-sync (no cluster: this measures the
# service alone). 100 hosts with 3 labels each are created, then for each operation wrk runs
# $CONNECTIONS connections (default 16) on 1 thread for $SECS seconds (default 10):
#   GET  /v1/ihosts/{uuid}/labels
#   POST /v1/labels/{uuid}?overwrite=true   (one label, a new value each time)
# and prints requests/s and latency percentiles. $KSTACK_BIN defaults to target/release/kstack
# (cargo build --release -p kstack-cli).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KSTACK_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/kstack}
connections=${CONNECTIONS:-16}
secs=${SECS:-10}
[[ -x $bin ]] || { echo "inventory-bench: no kstack binary at $bin (cargo build --release -p kstack-cli)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "inventory-bench: wrk is not installed (apt-get install wrk)" >&2; exit 1; }

work=$(mktemp -d)
pid=
cleanup() {
    if [[ -n $pid ]]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

database=${1:-sqlite:$work/inventory.db}
# The service refuses tokens under 32 characters and a tokens file others may read.
token=bench-$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
(umask 077 && printf '%s: admin\n' "$token" >"$work/tokens.yml")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port

"$bin" inventory serve --tokens "$work/tokens.yml" --database "$database" \
    --listen "127.0.0.1:$port" --no-node-sync --audit-interval 3600 \
    >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    curl -fsS "$base/openapi.json" -o /dev/null 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { echo "inventory-bench: server exited:" >&2; cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done

auth=(-H "Authorization: Bearer $token" -H "Content-Type: application/json")
for i in $(seq 0 99); do
    uuid=$(curl -fsS "${auth[@]}" -d "{\"hostname\":\"bench-$i\",\"personality\":\"compute\"}" \
        "$base/v1/ihosts" | python3 -c 'import json,sys; print(json.load(sys.stdin)["uuid"])')
    curl -fsS "${auth[@]}" -d "{\"zone\":\"a\",\"disk\":\"ssd\",\"rack\":\"r$((i % 10))\"}" \
        "$base/v1/labels/$uuid" -o /dev/null
    echo "$uuid" >>"$work/uuids"
done

echo "database: ${database%%:*}; $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for op in get post; do
    echo "== $op, $connections connections, ${secs}s"
    INV_UUIDS=$work/uuids INV_TOKEN=$token INV_OP=$op \
        wrk -t1 -c"$connections" -d"${secs}s" --latency -s "$root/hack/inventory-bench.lua" "$base"
done
