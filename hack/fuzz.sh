#!/usr/bin/env bash
# Fuzzes the config loaders with cargo fuzz (libFuzzer): each target in fuzz/ runs for SECONDS
# (default 30), seeded from the starter files, the test fixtures and the built-in catalog.
# A panic, an assertion in a target or a slow input stops the run; the input is kept in
# fuzz/artifacts/<target>/ and the script exits 1. Prints executions and executions/s per target.
#
#   bash hack/fuzz.sh [SECONDS] [TARGET...]
#
# Needs cargo-fuzz (installed once into ~/.cache/kstack/cargo-fuzz) and a nightly compiler: the
# nightly toolchain when rustup has one, else the stable one with RUSTC_BOOTSTRAP=1.
#
# The corpus lives under ~/.cache/kstack/fuzz-corpus/<target> (KSTACK_FUZZ_CORPUS), so each run
# starts from what the runs before it found. A run that passed is remembered by a hash of what
# the targets are built from (the loaders' crates, the targets, their lock file, the toolchain,
# SECONDS and the targets): the same inputs again are not fuzzed twice, and the script says so.
# KSTACK_FUZZ_ALWAYS=1 fuzzes anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
secs=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(globals passwords catalog genpwd config_dir)

fuzz_root=$HOME/.cache/kstack/cargo-fuzz
if [ ! -x "$fuzz_root/bin/cargo-fuzz" ]; then
  echo "== installing cargo-fuzz into $fuzz_root" >&2
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo install -q --locked cargo-fuzz --root "$fuzz_root"
fi
export PATH=$fuzz_root/bin:$PATH
corpus_root=${KSTACK_FUZZ_CORPUS:-$HOME/.cache/kstack/fuzz-corpus}

if rustup run nightly rustc --version >/dev/null 2>&1; then
  cargo=(cargo +nightly)
  echo "== toolchain: $(rustup run nightly rustc --version)" >&2
else
  cargo=(cargo)
  export RUSTC_BOOTSTRAP=1
  echo "== toolchain: $(rustc --version) with RUSTC_BOOTSTRAP=1 (no nightly toolchain)" >&2
fi

inputs_hash=$(
  { git ls-files -z crates/kstack-config crates/kstack-model fuzz | xargs -0 sha256sum
    "${cargo[@]}" --version; rustc --version; echo "$secs ${targets[*]}"; } | sha256sum | cut -c1-16)
passed=$HOME/.cache/kstack/fuzz-passed/$inputs_hash
if [ -e "$passed" ] && [ -z "${KSTACK_FUZZ_ALWAYS:-}" ]; then
  echo "fuzzing skipped: these loaders and targets ($inputs_hash) passed ${secs}s per target" \
    "on $(cat "$passed"); KSTACK_FUZZ_ALWAYS=1 fuzzes them again"
  exit 0
fi

# Seeds, beside what libFuzzer found in earlier runs.
seed() { mkdir -p "$corpus_root/$1" && cp "$2" "$corpus_root/$1/seed-$(basename "$2")"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cargo run -q --bin kstack -- init "$tmp/etc" >/dev/null
cp "$tmp/etc/passwords.yml" "$tmp/passwords-empty.yml"
cargo run -q --bin kstack -- genpwd --config-dir "$tmp/etc" >/dev/null
cp "$tmp/etc/passwords.yml" "$tmp/passwords-filled.yml"
cat >"$tmp/catalog-overlay.yml" <<'YAML'
# operator catalog: one changed dependency and one new service
services:
  nova-api:
    depends_on: [keystone, placement-api]
  extra:
    project: extra
    enable_flag: enable_nova
    role: control
    kind: deployment
    containers: []
YAML
for g in crates/kstack-config/templates/globals.yml crates/kstack-config/tests/fixtures/*.yml; do
  seed globals "$g"
done
for p in "$tmp/passwords-empty.yml" "$tmp/passwords-filled.yml"; do
  seed passwords "$p"
  seed genpwd "$p"
done
seed catalog "$tmp/catalog-overlay.yml"
seed catalog crates/kstack-model/catalog/services.yaml
{
  echo "==> globals.yml <=="; cat crates/kstack-config/templates/globals.yml
  echo "==> passwords.yml <=="; cat "$tmp/passwords-filled.yml"
  echo "==> catalog.yml <=="; cat "$tmp/catalog-overlay.yml"
  echo "==> global.conf <=="; printf '[DEFAULT]\ndebug = True\n'
  echo "==> nova/nova-api.conf <=="; printf '[api]\nmax_limit = 500\n'
  echo "==> neutron/ml2_conf.ini <=="; printf '[ml2]\nmechanism_drivers = openvswitch\n'
} >"$tmp/config-dir.txt"
seed config_dir "$tmp/config-dir.txt"
{
  echo "==> globals.yml <=="; cat crates/kstack-config/tests/fixtures/kolla-ansible-globals.yml
  echo "==> passwords.yml <=="; cat "$tmp/passwords-empty.yml"
} >"$tmp/config-dir-kolla.txt"
seed config_dir "$tmp/config-dir-kolla.txt"

# In CI the main build goes to $CARGO_TARGET_DIR (cached); the fuzz build goes beside it. Set
# only now: the seeding above runs the kstack binary of the main build.
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
  export CARGO_TARGET_DIR=$CARGO_TARGET_DIR/fuzz
fi
# hack/test.sh builds the workspace with clippy-driver as rustc's wrapper (the seeding above used
# that build); the fuzz targets build with the nightly compiler, and without lints.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
cd fuzz
# Release build with debug assertions (overflow checks on). No sanitizer: the loaders forbid
# unsafe code, and without ASan a short CI run gets several times more executions.
"${cargo[@]}" fuzz build -O -a -s none >&2
status=0
summary=()
for t in "${targets[@]}"; do
  echo "== fuzz $t for ${secs}s" >&2
  log=$tmp/$t.log
  # -timeout: an input that takes 10 s is a bug too (a hang), and is reported like a crash.
  if "${cargo[@]}" fuzz run -O -a -s none "$t" "$corpus_root/$t" -- -max_total_time="$secs" -timeout=10 \
      -print_final_stats=1 >"$log" 2>&1; then
    verdict=ok
  else
    verdict=FAIL
    status=1
    grep -E "panicked|ERROR: libFuzzer|SUMMARY|Test unit written|assert" "$log" | head -20 >&2 || tail -30 "$log" >&2
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  corpus=$(find "$corpus_root/$t" -type f | wc -l)
  summary+=("$(printf '%-5s %-11s %10s runs %8s exec/s  cov %-6s corpus %s' "$verdict" "$t" "${runs:-?}" \
    "${rate:-?}" "${cov:-?}" "$corpus")")
done
cd "$root"
printf '%s\n' "${summary[@]}"
if [ $status = 0 ]; then
  mkdir -p "$(dirname "$passed")"
  date -u +%Y-%m-%dT%H:%M:%SZ >"$passed"
fi
exit $status
