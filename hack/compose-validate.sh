#!/usr/bin/env bash
# Validate kstack's Compose output against the Compose specification.
#
#   hack/compose-validate.sh [COMPOSE_FILE...]
#
# Without arguments: renders a fresh config directory (`kstack init` + `kstack genpwd`) with
# `kstack template --target compose`, once with the defaults and once with cinder enabled too,
# and checks both. Then checks that broken files are rejected, so a pass means something.
#
# Two checks, both from the Go module github.com/compose-spec/compose-go/v2, the reference
# implementation docker compose is built on (version pinned in hack/compose-load/go.mod,
# checked against go.sum; fetched through the Go module proxy into ~/.cache/kstack/gomod):
# 1. its schema/compose-spec.json, with python `jsonschema` (+ PyYAML) from PyPI in the venv
#    ~/.cache/kstack/venv: every error is listed with its path;
# 2. its project loader (hack/compose-load, built into ~/.cache/kstack/tools): references between
#    services and volumes, as `docker compose up` would load the file.
# $KSTACK_BIN is the kstack binary (default target/debug/kstack).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KSTACK_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/kstack}
venv=${KSTACK_VENV:-$HOME/.cache/kstack/venv}
export GOMODCACHE=${KSTACK_GOMODCACHE:-$HOME/.cache/kstack/gomod}
export GOFLAGS=-mod=readonly

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The loader and the schema of the pinned compose-go (built and fetched once, then cached).
mod=github.com/compose-spec/compose-go/v2
version=$(cd "$root/hack/compose-load" && go list -m -f '{{.Version}}' "$mod")
loader=$HOME/.cache/kstack/tools/compose-load-$version
if [[ ! -x $loader ]]; then
    mkdir -p "$(dirname "$loader")"
    (cd "$root/hack/compose-load" && go build -o "$loader.tmp" . && mv "$loader.tmp" "$loader")
fi
schema=$(cd "$root/hack/compose-load" && go list -m -f '{{.Dir}}' "$mod")/schema/compose-spec.json
[[ -r $schema ]] || { echo "compose-validate: no schema at $schema" >&2; exit 1; }

if ! "$venv/bin/python" -c 'import jsonschema, yaml' 2>/dev/null; then
    [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q jsonschema pyyaml
fi

validate() {
    local rc=0
    "$venv/bin/python" - "$schema" "$@" <<'EOF' || rc=1
import json, sys
import jsonschema, yaml
schema = json.load(open(sys.argv[1]))
validator = jsonschema.Draft202012Validator(schema)
bad = 0
for path in sys.argv[2:]:
    doc = yaml.safe_load(open(path))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    for e in errors:
        where = "/".join(str(p) for p in e.absolute_path) or "(top)"
        print(f"{path}: {where}: {e.message}", file=sys.stderr)
    if errors:
        bad += 1
    else:
        print(f"{path}: valid ({len(doc.get('services', {}))} services)")
sys.exit(1 if bad else 0)
EOF
    "$loader" "$@" || rc=1
    return $rc
}

if [[ $# -gt 0 ]]; then
    validate "$@"
    exit
fi

[[ -x $bin ]] || { echo "compose-validate: no kstack binary at $bin (cargo build -p kstack-cli)" >&2; exit 1; }
export KSTACK_CONFIG_DIR=$work/cloud
"$bin" init "$work/cloud" >/dev/null 2>&1
"$bin" genpwd >/dev/null 2>&1
# With the config directories (-o): the loader reads the env files (env_file) they hold.
"$bin" template --target compose -o "$work/default" 2>/dev/null
printf '\nenable_cinder: "yes"\n' >>"$work/cloud/globals.yml"
"$bin" template --target compose -o "$work/all" 2>/dev/null
validate "$work/default/compose.yaml" "$work/all/compose.yaml"

# The checks must be able to fail: a restart policy that is not a string breaks the schema, a
# dependency on a service that does not exist breaks the project.
# Beside the good file, so everything it refers to is there.
sed 's/^    restart: always$/    restart: 7/' "$work/default/compose.yaml" >"$work/default/broken-schema.yaml"
sed 's/^      mariadb:$/      mariadb-missing:/' "$work/default/compose.yaml" >"$work/default/broken-ref.yaml"
for broken in "$work/default/broken-schema.yaml" "$work/default/broken-ref.yaml"; do
    if cmp -s "$work/default/compose.yaml" "$broken"; then
        echo "compose-validate: could not break $(basename "$broken")" >&2
        exit 1
    fi
    if validate "$broken" >/dev/null 2>&1; then
        echo "compose-validate: $(basename "$broken") passed validation" >&2
        exit 1
    fi
done
echo "compose-validate: broken files are rejected, as they should be"
