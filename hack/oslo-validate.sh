#!/usr/bin/env bash
# Validates every OpenStack (oslo) config file under DIR with oslo-config-validator of the real
# 2025.1 projects: unknown sections and options fail, and so do deprecated options unless
# --allow-deprecated is given (see hack/oslo/validate.py for why).
#
#   bash hack/oslo-validate.sh [--allow-deprecated] DIR
#
# DIR is typically `kstack template --config-files OUT`'s OUT (OUT/<service>/<container>/<file>);
# files are recognised by name (nova.conf, ml2_conf.ini, ...). Finding no such file is a failure.
# Exit status: 0 every file passes, 1 a file fails, 2 nothing to validate or bad usage.
#
# The first run creates a venv with the pinned projects (hack/oslo/requirements.txt) under
# ~/.cache/kstack/venv-oslo-<hash of the pins>; later runs reuse it. pip's download cache is
# ~/.cache/kstack/pip.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 [--allow-deprecated] DIR" >&2
  exit 2
fi
dir=${*: -1}
if [ ! -d "$dir" ]; then
  echo "oslo-validate: $dir is not a directory" >&2
  exit 2
fi

venv=$(bash "$here/oslo/venv.sh")
exec "$venv/bin/python" "$here/oslo/validate.py" "$@"
