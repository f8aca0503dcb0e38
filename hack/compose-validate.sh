#!/usr/bin/env bash
# Validate kstack's Compose output against the Compose specification's JSON schema.
#
#   hack/compose-validate.sh [COMPOSE_FILE...]
#
# Without arguments: renders a fresh config directory (`kstack init` + `kstack genpwd`) with
# `kstack template --target compose`, once with the defaults and once with cinder enabled too,
# and validates both. Then checks that the validator rejects a broken file, so a pass means
# something.
#
# The schema is the one the Compose reference implementation embeds and validates with:
# schema/compose-spec.json of the Go module github.com/compose-spec/compose-go/v2 (version
# pinned below, checked against the Go checksum database), fetched with `go mod download` into
# ~/.cache/kstack/gomod. The validator is python `jsonschema` (+ PyYAML) from PyPI in the venv
# ~/.cache/kstack/venv. $KSTACK_BIN is the kstack binary (default target/debug/kstack).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KSTACK_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/kstack}
venv=${KSTACK_VENV:-$HOME/.cache/kstack/venv}
compose_go=github.com/compose-spec/compose-go/v2@${COMPOSE_GO_VERSION:-v2.16.2}
export GOMODCACHE=${KSTACK_GOMODCACHE:-$HOME/.cache/kstack/gomod}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The schema, from the Go module (cached after the first run).
dir=$(cd "$work" && GOFLAGS= GO111MODULE=on go mod download -json "$compose_go" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
schema=$dir/schema/compose-spec.json
[[ -r $schema ]] || { echo "compose-validate: no schema at $schema" >&2; exit 1; }

if ! "$venv/bin/python" -c 'import jsonschema, yaml' 2>/dev/null; then
    [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q jsonschema pyyaml
fi

validate() {
    "$venv/bin/python" - "$schema" "$@" <<'EOF'
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
}

if [[ $# -gt 0 ]]; then
    validate "$@"
    exit
fi

[[ -x $bin ]] || { echo "compose-validate: no kstack binary at $bin (cargo build -p kstack-cli)" >&2; exit 1; }
export KSTACK_CONFIG_DIR=$work/cloud
"$bin" init "$work/cloud" >/dev/null 2>&1
"$bin" genpwd >/dev/null 2>&1
"$bin" template --target compose >"$work/default.yaml" 2>/dev/null
printf '\nenable_cinder: "yes"\n' >>"$work/cloud/globals.yml"
"$bin" template --target compose -o "$work/all" 2>/dev/null
validate "$work/default.yaml" "$work/all/compose.yaml"

# The check must be able to fail: a restart policy that is not a string is not Compose.
sed 's/^    restart: always$/    restart: 7/' "$work/default.yaml" >"$work/broken.yaml"
cmp -s "$work/default.yaml" "$work/broken.yaml" && { echo "compose-validate: could not break the file" >&2; exit 1; }
if validate "$work/broken.yaml" 2>/dev/null; then
    echo "compose-validate: a broken Compose file passed validation" >&2
    exit 1
fi
echo "compose-validate: a broken file is rejected, as it should be"
