#!/usr/bin/env bash
# Creates (once) the venv holding the pinned 2025.1 projects and prints its path. The venv is
# keyed by the pins and the Python version, and only counts as built once every package installed
# (a `.complete` marker), so an interrupted install is redone rather than used half-made.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
req=$here/requirements.txt
py=${PYTHON:-python3}
key=$( (cat "$req"; "$py" -c 'import sys; print(sys.version_info[:2])') | sha256sum | cut -c1-16)
venv=$HOME/.cache/kstack/venv-oslo-$key
# One install at a time (CI starts this one early, in the background, and the tests ask again).
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [ ! -f "$venv/.complete" ]; then
  start=$SECONDS
  echo "oslo-validate: creating $venv (pinned 2025.1 projects; a few minutes the first time)" >&2
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv"
  export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$HOME/.cache/kstack/pip}
  # Every dependency is pinned in requirements.txt, so nothing unpinned may come in (--no-deps);
  # `pip check` then proves the pins are complete and consistent.
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$req" >&2
  "$venv/bin/pip" check >&2
  touch "$venv/.complete"
  echo "oslo-validate: venv ready in $((SECONDS - start))s" >&2
fi
echo "$venv"
