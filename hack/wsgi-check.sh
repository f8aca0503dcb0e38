#!/usr/bin/env bash
# Checks that the WSGI entry points of kstack's rendered files (Apache `WSGIScriptAlias`, uWSGI
# `module`) exist in the pinned 2025.1 projects, using the venv of hack/oslo-validate.sh.
#
#   bash hack/wsgi-check.sh DIR
#
# DIR is `kstack template --config-files OUT`'s OUT. Exit status: 0 all found, 1 one missing,
# 2 nothing to check or bad usage (see hack/oslo/wsgi_entries.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
venv=$(bash "$here/oslo/venv.sh")
exec "$venv/bin/python" "$here/oslo/wsgi_entries.py" "$1"
