#!/usr/bin/env bash
# Creates (once) the venv holding kolla-ansible 2025.1 and Jinja2 (requirements.txt) and prints
# its path. The venv is keyed by the pins and the Python version, and only counts as built once
# every package installed (a `.complete` marker), so an interrupted install is redone rather than
# used half-made.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
req=$here/requirements.txt
py=${PYTHON:-python3}
key=$( (cat "$req"; "$py" -c 'import sys; print(sys.version_info[:2])') | sha256sum | cut -c1-16)
venv=$HOME/.cache/kstack/venv-parity-$key
if [ ! -f "$venv/.complete" ]; then
  start=$SECONDS
  echo "distro-parity: creating $venv (kolla-ansible 2025.1, Jinja2)" >&2
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv"
  export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$HOME/.cache/kstack/pip}
  # --no-deps: kolla-ansible's own dependencies (Ansible, ...) are not needed to read its
  # templates, and nothing unpinned may come in. No `pip check` for the same reason.
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$req" >&2
  touch "$venv/.complete"
  echo "distro-parity: venv ready in $((SECONDS - start))s" >&2
fi
echo "$venv"
