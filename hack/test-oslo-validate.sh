#!/usr/bin/env bash
# Proves hack/oslo-validate.sh can fail: the fixtures in hack/testdata/oslo must give the expected
# verdict, and each failing one must name the file, section and option.
set -euo pipefail
cd "$(dirname "$0")/.."
t=hack/testdata/oslo
fail=0

# expect NAME STATUS TEXT [ARGS...]: run on $t/NAME, expect exit STATUS and TEXT in the output.
expect() {
  local name=$1 want=$2 text=$3
  shift 3
  local out status=0
  out=$(bash hack/oslo-validate.sh "$@" "$t/$name" 2>&1) || status=$?
  if [ "$status" != "$want" ] || ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL $name $*: expected exit $want and \"$text\", got exit $status:" >&2
    sed 's/^/    /' <<<"$out" >&2
    fail=1
  else
    echo "ok   $name $*: exit $status, \"$text\""
  fi
}

expect good 0 "12 of 12 files pass"
expect bad-option 1 "nova-api/nova-api/nova.conf: unknown option [DEFAULT] transport_ur"
expect bad-section 1 "placement-api/placement-api/placement.conf: unknown section [placment_database]"
expect bad-authtoken 1 "glance-api/glance-api/glance-api.conf: unknown option [keystone_authtoken] pasword"
expect deprecated 1 "error: nova-api/nova-api/nova.conf: deprecated option [DEFAULT] vnc_enabled (an old name; use [vnc] enabled)"
expect deprecated 0 "warning: nova-api/nova-api/nova.conf: deprecated option [DEFAULT] vnc_enabled" --allow-deprecated
expect bad-ini 1 "keystone/keystone/keystone.conf: cannot validate: at "
expect none 2 "no oslo config file found"
exit $fail
